package hostlist

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Compress writes names as one hostlist expression, the form scontrol and
// sinfo take (gpu[01-03,07,40],login): names that end in digits and share
// the text before them join one bracket group; consecutive numbers written
// the way their run's first is padded (Slurm pads a LO-HI item to LO's
// width: [08-10] is 08 09 10) become one LO-HI item, and every other number
// is an item as written; names without digits at the end stand as they
// are. Duplicates are dropped. Expand(Compress(names)) gives the names
// back, grouped and sorted.
func Compress(names []string) string {
	type num struct {
		v uint64
		s string // as written, padding kept
	}
	groups := map[string][]num{}
	var prefixes, plain []string
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		v, err := strconv.ParseUint(n[i:], 10, 32)
		if i == len(n) || err != nil {
			plain = append(plain, n)
			continue
		}
		if _, ok := groups[n[:i]]; !ok {
			prefixes = append(prefixes, n[:i])
		}
		groups[n[:i]] = append(groups[n[:i]], num{v, n[i:]})
	}
	sort.Strings(prefixes)
	var out []string
	for _, p := range prefixes {
		nums := groups[p]
		sort.Slice(nums, func(a, b int) bool {
			if nums[a].v != nums[b].v {
				return nums[a].v < nums[b].v
			}
			return len(nums[a].s) < len(nums[b].s)
		})
		if len(nums) == 1 {
			out = append(out, p+nums[0].s)
			continue
		}
		var items []string
		used := make([]bool, len(nums))
		for i := range nums {
			if used[i] {
				continue
			}
			used[i] = true
			lo, width, hi := nums[i], len(nums[i].s), nums[i]
			// Extend the run with the next value written as LO's width pads it.
			for j := i + 1; j < len(nums); j++ {
				if used[j] || nums[j].v != hi.v+1 {
					if nums[j].v > hi.v+1 {
						break
					}
					continue
				}
				if nums[j].s != fmt.Sprintf("%0*d", width, nums[j].v) {
					continue
				}
				used[j], hi = true, nums[j]
			}
			if hi == lo {
				items = append(items, lo.s)
			} else {
				items = append(items, lo.s+"-"+hi.s)
			}
		}
		out = append(out, p+"["+strings.Join(items, ",")+"]")
	}
	sort.Strings(plain)
	return strings.Join(append(out, plain...), ",")
}
