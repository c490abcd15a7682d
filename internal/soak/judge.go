package soak

import "github.com/gdrconf/gdrconf/internal/verdict"

// Thresholds are the bounds the judges hold a series to, each with its
// source.
//
// Placeholder: the judges' work replaces this file; until then Judge
// judges nothing and the soak requirements report not judged.
type Thresholds struct{}

// DefaultThresholds are the cited defaults.
func DefaultThresholds() Thresholds { return Thresholds{} }

// Judge judges s: every finding's Req is its SOAK-NN requirement; a
// requirement with nothing wrong has no finding, one that could not be
// judged (nothing measured to judge it by) has a finding whose Outcome
// says so.
func Judge(s *Series, th Thresholds) []verdict.Finding {
	var out []verdict.Finding
	for _, id := range []string{"SOAK-01", "SOAK-02", "SOAK-03", "SOAK-04", "SOAK-05", "SOAK-06", "SOAK-07"} {
		f := *verdict.NotJudgedf("", "the soak judges are not built yet")
		f.Req = id
		out = append(out, f)
	}
	return out
}
