package reqs

import (
	"fmt"
	"time"
)

// added is when each requirement entered the catalogue: the commit time of
// the first commit that registered its ID (for those before this table,
// `git log --reverse --format=%cI -S'"<ID>"' -- internal/reqs`). A run of a
// suite built before that time could not have run the requirement, so a
// report over a recording older than a requirement says "not in this suite
// version", not "-run filter?" (report: olderSuite). A new requirement adds
// its line with the time it is added, in UTC; TestEveryRequirementAdded
// fails for an ID without one.
var added = map[string]string{
	"GPU-01":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-02":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-03":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-04":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-05":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-06":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-07":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-08":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-09":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-10":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-11":  "2026-11-29T20:39:57Z", // 60f2f95
	"GPU-12":  "2026-12-01T10:06:51Z", // 7a4e8ea
	"GPU-13":  "2026-12-01T10:06:51Z", // 7a4e8ea
	"GPU-14":  "2026-12-01T10:06:51Z", // 7a4e8ea
	"GPU-15":  "2026-12-01T10:06:51Z", // 7a4e8ea
	"GPU-16":  "2026-12-02T05:18:59Z", // 85e9774
	"HLTH-01": "2026-12-01T12:12:59Z", // af14819
	"HLTH-02": "2026-12-01T12:12:59Z", // af14819
	"INST-01": "2026-11-29T20:41:47Z", // 96f6965
	"INST-02": "2026-11-29T20:41:47Z", // 96f6965
	"INST-03": "2026-11-29T20:32:00Z", // 69cd359
	"INST-04": "2026-11-29T20:41:47Z", // 96f6965
	"INST-05": "2026-11-29T20:41:47Z", // 96f6965
	"INST-06": "2026-11-29T20:41:47Z", // 96f6965
	"INST-07": "2026-11-29T20:41:47Z", // 96f6965
	"INST-08": "2026-11-29T20:41:47Z", // 96f6965
	"INST-09": "2026-11-29T20:41:47Z", // 96f6965
	"INST-10": "2026-11-29T20:41:47Z", // 96f6965
	"INST-11": "2026-11-29T20:41:47Z", // 96f6965
	"INST-12": "2026-11-29T20:41:47Z", // 96f6965
	"INST-13": "2026-11-29T20:41:47Z", // 96f6965
	"INST-14": "2026-11-29T20:41:47Z", // 96f6965
	"MREG-01": "2026-11-29T20:39:57Z", // 60f2f95
	"MREG-02": "2026-11-29T20:39:57Z", // 60f2f95
	"MREG-03": "2026-11-29T20:39:57Z", // 60f2f95
	"MREG-04": "2026-11-29T20:39:57Z", // 60f2f95
	"MREG-05": "2026-11-29T20:39:57Z", // 60f2f95
	"PP-01":   "2026-11-29T20:44:47Z", // 436da20
	"PP-02":   "2026-11-29T20:44:47Z", // 436da20
	"PP-03":   "2026-11-29T20:44:47Z", // 436da20
	"PP-04":   "2026-11-29T20:44:47Z", // 436da20
	"PP-05":   "2026-11-29T20:44:47Z", // 436da20
	"PP-06":   "2026-11-29T20:44:47Z", // 436da20
	"PP-07":   "2026-11-29T20:44:47Z", // 436da20
	"PP-08":   "2026-11-29T20:44:47Z", // 436da20
	"PP-09":   "2026-11-29T21:24:58Z", // 397c2c6
	"PP-10":   "2026-12-01T09:59:39Z", // 9a44904
	"SOAK-01": "2026-12-05T03:00:00Z",
	"SOAK-02": "2026-12-05T03:00:00Z",
	"SOAK-03": "2026-12-05T03:00:00Z",
	"SOAK-04": "2026-12-05T03:00:00Z",
	"SOAK-05": "2026-12-05T03:00:00Z",
	"SOAK-06": "2026-12-05T03:00:00Z",
	"SOAK-07": "2026-12-05T03:00:00Z",
	"SOAK-08": "2026-12-05T03:00:00Z",
	"TOPO-01": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-02": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-03": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-04": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-05": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-06": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-07": "2026-11-29T20:49:26Z", // fc03384
	"TOPO-08": "2026-12-01T09:09:46Z", // 5454c60
	"TOPO-09": "2026-12-02T05:36:44Z", // bac4587
	"TOPO-10": "2026-12-02T05:41:36Z", // 909a6f2
}

// Added is when the requirement id entered the catalogue; false for an ID
// without a time (not in the catalogue).
func Added(id string) (time.Time, bool) {
	s, ok := added[id]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(fmt.Sprintf("reqs: added time of %s: %v", id, err)) // TestEveryRequirementAdded parses each
	}
	return t, true
}
