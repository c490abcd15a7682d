package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/jstemmer/go-junit-report/v2/junit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/report/junitcheck"
)

func junitOf(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.WriteJUnit(&b))
	return b.Bytes()
}

// verdictHost has one case of each kind a CI system must tell apart: a
// must requirement that fell short (contract attributes), one the suite
// could not judge, one failing without gdr.outcome (older tests), a
// report-only requirement not met, and a package that did not build.
func verdictHost(name string) Run {
	at := time.Date(2026, 12, 1, 22, 30, 5, 0, time.FixedZone("CET", 3600))
	evs := events("github.com/gdrconf/gdrconf/conformance/pingpong",
		tc{name: "TestPP08Bandwidth", result: "fail", attrs: []string{"gdr.req", "PP-08"}},
		tc{name: "TestPP08Bandwidth/WRITE/1048576", result: "fail",
			attrs: []string{"gdr.nic", "mlx5_0", "gdr.bw_gbit_s", "12.1", "gdr.min_bw_gbit_s", "75", "gdr.measured", "gdr.bw_gbit_s",
				"gdr.threshold", "gdr.min_bw_gbit_s", "gdr.threshold_source", "75% of port rate", "gdr.outcome", "fell_short",
				"gdr.cause", "RDMA WRITE of 1 MiB from GPU memory reaches 12.1 Gbit/s", "gdr.remedy", "check the NIC's PCIe link (TOPO-04)"},
			out: []string{"    pingpong_test.go:300: RDMA WRITE of 1 MiB from GPU memory reaches 12.1 Gbit/s, below 75 Gbit/s; remedy: check the NIC's PCIe link (TOPO-04)"}},
		tc{name: "TestPP03Write", result: "fail", attrs: []string{"gdr.req", "PP-03", "gdr.outcome", "not_judged", "gdr.cause", "peer gpu02 vanished", "gdr.remedy", "check the peer"},
			out: []string{"    pingpong_test.go:90: peer gpu02 vanished; remedy: check the peer"}},
		tc{name: "TestPP04Read", result: "fail", attrs: []string{"gdr.req", "PP-04"},
			out: []string{"    pingpong_test.go:120: READ data differs at byte 7; remedy: check the NIC firmware"}},
		tc{name: "TestPP09HostVsGPU", result: "fail", attrs: []string{"gdr.req", "PP-09"},
			out: []string{"    pingpong_test.go:400: GPU memory reaches 0.41 of host memory's bandwidth; remedy: check the path class (TOPO-02)"}},
	)
	for i := range evs {
		tm := at.Add(time.Duration(i) * time.Second)
		evs[i].Time = &tm
	}
	evs = append(evs,
		Event{Action: "build-output", ImportPath: "github.com/gdrconf/gdrconf/conformance/gpu [github.com/gdrconf/gdrconf/conformance/gpu.test]", Output: "gpu_test.go:3:2: undefined: cuda.Foo\n"},
		Event{Action: "build-fail", ImportPath: "github.com/gdrconf/gdrconf/conformance/gpu [github.com/gdrconf/gdrconf/conformance/gpu.test]"},
		Event{Action: "start", Package: "github.com/gdrconf/gdrconf/conformance/gpu"},
		Event{Action: "output", Package: "github.com/gdrconf/gdrconf/conformance/gpu", Output: "FAIL\tgithub.com/gdrconf/gdrconf/conformance/gpu [build failed]\n"},
		Event{Action: "fail", Package: "github.com/gdrconf/gdrconf/conformance/gpu"},
	)
	return Run{Host: Identity{Host: name, Suite: "v1.4.0-3-gabc"}, Events: evs, Errs: []string{"the VM died\nlast console line"}}
}

// constructedReports are reports the tests build, beside the recordings:
// every kind of result the writer has (failures, errors, report-only
// misses, a package that did not build, a run error, a test that did not
// finish, host-only skips, a strict run, an earlier run superseded, a
// fleet).
func constructedReports(t testing.TB) map[string]*Report {
	two := 2
	const install = "github.com/gdrconf/gdrconf/conformance/install"
	dnf := events(install,
		tc{name: "TestINST01DriverLoaded", result: "pass", attrs: []string{"gdr.req", "INST-01"}},
		tc{name: "TestINST05CUDAToolkit", attrs: []string{"gdr.req", "INST-05"}, out: []string{"    driver_test.go:180: running nvcc -V"}})
	dnf = append(dnf, Event{Action: "output", Package: install, Output: "panic: test timed out after 10m0s\n"},
		Event{Action: "output", Package: install, Output: "FAIL\t" + install + "\t600.1s\n"}, Event{Action: "fail", Package: install, Elapsed: 600.1})
	host := []string{"gdr.host_only", "the host's developer environment", "gdr.skip", "not judgeable from a container: the host's developer environment"}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	early, late := at(gpuHost("gpu01"), t0), at(gpuHost("gpu01"), t0.Add(time.Hour))
	early.Host.MachineID, late.Host.MachineID = "m1", "m1"
	merged, err := MergeRuns([]Run{late, early}, true)
	require.NoError(t, err)
	return map[string]*Report{
		"gpu hosts": Build([]Run{gpuHost("gpu-01.example.com"), gpuHost("gpu-02.example.com")}),
		"verdicts":  Build([]Run{verdictHost("gpu01")}),
		"unnamed":   Build([]Run{{Host: Identity{Host: ""}, Events: events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}})}}),
		"control": Build([]Run{{Host: Identity{Host: "ctl"}, Events: events("x/conformance/gpu",
			tc{name: "TestGPU02ComputeCapability", result: "fail", attrs: []string{"gdr.req", "GPU-02", "gdr.note", "bell\x07"}, out: []string{"    x.go:1: nvidia-smi printed \x01\x1b[0m; remedy: none"}})}}),
		"did not finish":    Build([]Run{{Host: Identity{Host: "dgx-1", GoTestExit: &two}, Events: dnf}}),
		"strict, host only": Build([]Run{allPass(map[string][]string{"INST-14": host, "TOPO-03": {"gdr.skip", "no switch"}})}),
		"earlier run":       Build(merged),
		"fleet":             Build(fleetRuns(t, 12, 3)),
	}
}

// suitesByName merges the suites of each name (the writer makes one per
// case) into one view: cases in file order, counts summed, the first
// properties written, system-out joined.
func suitesByName(doc JUnit) map[string]JUnitSuite {
	out := map[string]JUnitSuite{}
	for _, s := range doc.Suites {
		m, ok := out[s.Name]
		if !ok {
			m = s
			m.Cases = append([]JUnitCase(nil), s.Cases...)
			m.SystemOut = &junit.Output{}
			if s.SystemOut != nil {
				m.SystemOut.Data = s.SystemOut.Data
			}
			out[s.Name] = m
			continue
		}
		m.Cases = append(m.Cases, s.Cases...)
		m.Tests += s.Tests
		m.Failures += s.Failures
		m.Errors += s.Errors
		m.Skipped += s.Skipped
		if (m.Properties == nil || len(*m.Properties) == 0) && s.Properties != nil {
			m.Properties = s.Properties
		}
		if s.SystemOut != nil {
			m.SystemOut.Data += "\n" + s.SystemOut.Data
		}
		out[s.Name] = m
	}
	return out
}

// testedFiles are the junit.xml of every recorded run and of every report
// the tests construct (constructedReports, and a cluster with a slow rail),
// by name.
func testedFiles(t *testing.T) map[string][]byte {
	ents, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		runs, err := LoadDir(filepath.Join(runsDir, e.Name()))
		require.NoError(t, err)
		files["fixtures/runs/"+e.Name()] = junitOf(t, Build(runs))
	}
	for name, r := range constructedReports(t) {
		files[name] = junitOf(t, r)
	}
	runs, a, err := LoadCluster(clusterFolder(t, map[string]int{"vm3": 1}), isolate.Options{MinFraction: 0.5}, "")
	require.NoError(t, err)
	cl := Build(runs)
	cl.SetCluster(a)
	files["cluster with a slow rail"] = junitOf(t, cl)
	return files
}

// Every recorded run and every constructed report is valid against both
// XSDs themselves (xmllint) and what they cannot express
// (junitcheck.Beyond).
func TestJUnitSchemas(t *testing.T) {
	t.Log("checked by", junitcheck.Method())
	files := testedFiles(t)
	require.Greater(t, len(files), 15)
	for name, b := range files {
		problems, err := junitcheck.Check(b)
		require.NoError(t, err)
		assert.Empty(t, problems, "%s", name)
		assert.NotContains(t, string(b), "<skipped type=", "%s: the Ant schema allows no type on <skipped>", name)
	}
}

// The validator fails what the schemas reject: the recordings' own
// gotestsum files (properties inside a case), violations planted into a
// file this package wrote, each by the schema that forbids it, and what
// only junitcheck.Beyond sees.
func TestJUnitSchemaCheckerCatches(t *testing.T) {
	junitcheck.Need(t)
	against := func(s junitcheck.Schema, b []byte) []string {
		t.Helper()
		p, err := junitcheck.Against(s, b)
		require.NoError(t, err)
		return p
	}
	old, err := os.ReadFile(filepath.Join(runsDir, "h200-dist", "junit.xml"))
	require.NoError(t, err)
	assert.NotEmpty(t, grep(against(junitcheck.JUnit10, old), "'properties': This element is not expected"), "gotestsum's file has properties inside cases")
	assert.NotEmpty(t, against(junitcheck.Ant, old))

	good := string(junitOf(t, Build([]Run{verdictHost("gpu01")})))
	for _, s := range junitcheck.Schemas {
		require.Empty(t, against(s, []byte(good)), s.Name)
	}
	require.Empty(t, junitcheck.Beyond([]byte(good)))
	plant := func(old, new string) []byte {
		t.Helper()
		require.Contains(t, good, old)
		return []byte(strings.Replace(good, old, new, 1))
	}
	caseOpen := regexp.MustCompile(`<testcase [^>]*>`).FindString(good)
	caseProps := plant(caseOpen, caseOpen+`<properties><property name="gdr.req" value="PP-08"></property></properties>`)
	assert.NotEmpty(t, grep(against(junitcheck.JUnit10, caseProps), "'properties': This element is not expected"))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, caseProps), "'properties': This element is not expected"))

	noStamp := []byte(regexpReplaceFirst(good, ` timestamp="[^"]*"`, ""))
	assert.Empty(t, against(junitcheck.JUnit10, noStamp), "junit-10 leaves timestamp optional")
	assert.NotEmpty(t, grep(against(junitcheck.Ant, noStamp), "The attribute 'timestamp' is required"))

	skippedTop := plant(`<testsuites>`, `<testsuites skipped="3">`)
	assert.NotEmpty(t, grep(against(junitcheck.JUnit10, skippedTop), "The attribute 'skipped' is not allowed"))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, skippedTop), "The attribute 'skipped' is not allowed"))

	zoned := []byte(regexpReplaceFirst(good, ` timestamp="([^"]*)"`, ` timestamp="${1}Z"`))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, zoned), "'timestamp'"))
	badTime := plant(`time="0.010"`, `time="10ms"`)
	assert.NotEmpty(t, grep(against(junitcheck.Ant, badTime), "'time'"))
	noType := []byte(regexpReplaceFirst(good, ` type="fell_short"`, ""))
	assert.Empty(t, against(junitcheck.JUnit10, noType))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, noType), "The attribute 'type' is required"))
	outInCase := plant(caseOpen, caseOpen+`<system-out>x</system-out>`)
	assert.Empty(t, against(junitcheck.JUnit10, outInCase), "junit-10 takes output in a case")
	assert.NotEmpty(t, grep(against(junitcheck.Ant, outInCase), "'system-out': This element is not expected"), "Ant does not")
	noErr := []byte(strings.Replace(good, `<system-err></system-err>`, "", 1))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, noErr), "Missing child element(s)"))
	// What this package wrote for a report-only requirement's miss until
	// the Ant schema was checked by the schema itself.
	reportOnly := plant(`<skipped message="report-only, not met:`, `<skipped type="report_only_not_met" message="report-only, not met:`)
	assert.Empty(t, against(junitcheck.JUnit10, reportOnly))
	assert.NotEmpty(t, grep(against(junitcheck.Ant, reportOnly), "The attribute 'type' is not allowed"))

	// Beyond the schemas.
	caseLine := regexp.MustCompile(`(?s)<testcase [^>]*>.*?</testcase>`).FindString(good)
	require.NotEmpty(t, caseLine)
	dup := plant(caseLine, caseLine+"\n"+caseLine)
	assert.NotEmpty(t, grep(junitcheck.Beyond(dup), "GitLab keeps one case"))
	assert.NotEmpty(t, grep(junitcheck.Beyond(dup), "but it holds"), "tests= counts one case fewer")
	ids := []byte(regexpReplaceFirst(good, ` id="1"`, ` id="7"`))
	assert.NotEmpty(t, grep(junitcheck.Beyond(ids), `id="7"`))
}

func grep(errs []string, s string) []string {
	var out []string
	for _, e := range errs {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

// gitlabShown is what GitLab shows for a case, reimplemented from
// gitlabhq/gitlabhq lib/gitlab/ci/parsers/test/junit.rb: the first of
// failure, error, skipped becomes the status, and that element, as
// ActiveSupport's Hash.from_xml converts it, the shown text (a passed case
// shows none: system_output is nil); the case's and the suite's
// system-out are not shown. from_xml makes an element with non-blank text
// that text (its attributes, the message among them, are dropped); one
// with attributes and blank text stays a hash (GitLab printed it as such):
// isText is false then.
func gitlabShown(c JUnitCase) (status, shown string, isText bool) {
	for _, r := range []struct {
		status string
		res    *junit.Result
	}{{"failed", c.Failure}, {"error", c.Error}, {"skipped", c.Skipped}} {
		if r.res == nil {
			continue
		}
		if strings.TrimSpace(r.res.Data) != "" {
			return r.status, r.res.Data, true
		}
		return r.status, "", r.res.Message == "" && r.res.Type == ""
	}
	return "success", "", true
}

// jenkinsCase is what Jenkins' junit plugin keeps of a case and shows on
// its page.
type jenkinsCase struct {
	ErrorDetails, StackTrace, SkippedMessage, Stdout string
}

func (j jenkinsCase) shown() string {
	return j.ErrorDetails + "\n" + j.StackTrace + "\n" + j.SkippedMessage + "\n" + j.Stdout
}

// jenkinsView is each case of doc as Jenkins' junit plugin keeps it with
// its defaults (no keepLongStdio: stdioRetention NONE), reimplemented from
// jenkinsci/junit-plugin src/main/java/hudson/tasks/junit: CaseResult's
// constructor (errorDetails: the message of <error>, else of <failure>;
// errorStackTrace: their text; skippedMessage: <skipped>'s message, else
// its text; stdout: the case's own system-out) and getStdout (without its
// own, its suite's: SuiteResult, one per <testsuite> with a case, merged
// with another only when name and id are equal: TestResult.add), and
// possiblyTrimStdio (the first and last 500 characters when no case of the
// collection has an error or failure, 50000 when one has).
func jenkinsView(doc JUnit) map[string]jenkinsCase {
	trim := func(failing bool, s string) string {
		half := 500
		if failing {
			half = 50000
		}
		u := utf16.Encode([]rune(s)) // Java counts UTF-16 code units
		middle := len(u) - 2*half
		if middle <= 0 {
			return s
		}
		return string(utf16.Decode(u[:half])) + "\n...[truncated " + strconv.Itoa(middle) + " chars]...\n" + string(utf16.Decode(u[len(u)-half:]))
	}
	out := map[string]jenkinsCase{}
	for _, s := range doc.Suites {
		failing := false
		for _, c := range s.Cases {
			failing = failing || c.Failure != nil || c.Error != nil
		}
		var suiteOut string
		if s.SystemOut != nil {
			suiteOut = trim(failing, s.SystemOut.Data)
		}
		for _, c := range s.Cases {
			var j jenkinsCase
			if r := c.Error; r != nil {
				j.ErrorDetails, j.StackTrace = r.Message, r.Data
			} else if r := c.Failure; r != nil {
				j.ErrorDetails, j.StackTrace = r.Message, r.Data
			}
			if r := c.Skipped; r != nil {
				j.SkippedMessage = r.Message
				if j.SkippedMessage == "" {
					j.SkippedMessage = r.Data
				}
			}
			j.Stdout = suiteOut
			if c.SystemOut != nil {
				j.Stdout = trim(c.Failure != nil || c.Error != nil, c.SystemOut.Data)
			}
			out[c.Name] = j
		}
	}
	return out
}

// caseFacts are the facts of a counted case a CI view must show: the
// judged value against its threshold and the threshold's source (as the
// message words them), and for a failure its cause, remedy and part.
func caseFacts(c *Case) []string {
	var f []string
	if m := measured(c); m != "" {
		f = append(f, m)
	}
	if c.Status() == Fail {
		cause, remedy := c.CauseAndRemedy()
		f = append(f, cause)
		if remedy != "" {
			f = append(f, remedy)
		}
		if c.Part != nil {
			f = append(f, c.Part.String())
		}
	}
	return f
}

// passingHost's pingpong cases all passed, each with a value, a threshold
// and its source and a long log: Jenkins trimmed such an area's one suite
// to its first and last 500 characters, and the facts of the cases between
// with it.
func passingHost(name string) Run {
	var log []string
	for i := 0; i < 40; i++ {
		log = append(log, fmt.Sprintf("    pingpong_test.go:%d: iteration %d of the bandwidth loop", 300+i, i))
	}
	tests := []tc{{name: "TestPP08Bandwidth", result: "pass", attrs: []string{"gdr.req", "PP-08"}}}
	for i, bw := range []string{"92.3", "88.8", "90.1"} {
		tests = append(tests, tc{name: fmt.Sprintf("TestPP08Bandwidth/READ/%d", 65536<<i), result: "pass",
			attrs: []string{"gdr.nic", "mlx5_0", "gdr.bw_gbit_s", bw, "gdr.min_bw_gbit_s", "75", "gdr.threshold_source", "75% of port rate"}, out: log})
	}
	return Run{Host: Identity{Host: name}, Events: events("github.com/gdrconf/gdrconf/conformance/pingpong", tests...)}
}

// Each case's facts are in what Jenkins (default settings) shows of it,
// passed ones included, and in what GitLab shows of a failed one; GitLab
// shows nothing of a passed case but its name and time.
func TestJUnitCIViewsShowEachCasesFacts(t *testing.T) {
	r := Build([]Run{verdictHost("gpu01"), gpuHost("gpu02"), passingHost("gpu03")})
	doc := parseJUnit(t, junitOf(t, r))
	jv := jenkinsView(doc)
	gl := map[string]JUnitCase{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			gl[c.Name] = c
		}
	}
	checked := map[Status]int{}
	for _, h := range r.Hosts {
		for _, c := range h.Cases() {
			if !c.Counted {
				continue
			}
			name := CaseName(c.Name, h.Identity.Host)
			j, ok := jv[name]
			require.True(t, ok, "Jenkins has %s", name)
			facts := caseFacts(c)
			for _, f := range facts {
				assert.Contains(t, j.shown(), f, "Jenkins' view of %s (%s)", name, c.Status())
			}
			status, shown, _ := gitlabShown(gl[name])
			if c.Status() == Pass {
				assert.Equal(t, "success", status)
				assert.Empty(t, shown, "GitLab shows no text of a passed case")
			} else {
				for _, f := range facts {
					assert.Contains(t, shown, f, "GitLab's view of %s", name)
				}
			}
			if len(facts) > 0 {
				checked[c.Status()]++
			}
		}
	}
	assert.GreaterOrEqual(t, checked[Pass], 3, "passed cases with a value checked")
	assert.GreaterOrEqual(t, checked[Fail], 4, "failed cases checked")
	pass := jv["TestPP08Bandwidth/READ/131072 [gpu03]"]
	assert.Contains(t, pass.Stdout, "...[truncated", "the passed case's log is long enough for Jenkins to trim it")
	assert.Contains(t, pass.Stdout, "pass: bw 88.8 Gbit/s >= floor 75 Gbit/s (75% of port rate)")
	fail := jv["TestPP08Bandwidth/WRITE/1048576 [gpu01]"]
	assert.Equal(t, "PP-08 must on gpu01: bw 12.1 Gbit/s < floor 75 Gbit/s (75% of port rate): RDMA WRITE of 1 MiB from GPU memory reaches 12.1 Gbit/s", fail.ErrorDetails)
	assert.Contains(t, fail.StackTrace, "remedy: check the NIC's PCIe link (TOPO-04)")
}

// GitLab's view of a failing case starts with its reason (requirement,
// level, host, value, threshold, cause), then the remedy; evidence after.
func TestJUnitGitLabView(t *testing.T) {
	doc := parseJUnit(t, junitOf(t, Build([]Run{verdictHost("gpu01"), gpuHost("gpu02")})))
	seen := map[string]string{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			status, shown, isText := gitlabShown(c)
			if status == "success" {
				continue
			}
			require.True(t, isText, "case %q reaches GitLab as a hash, not text", c.Name)
			lines := strings.Split(shown, "\n")
			seen[c.Name] = shown
			if c.Failure != nil {
				assert.Equal(t, c.Failure.Message, lines[0], "case %q: GitLab shows the reason first", c.Name)
			}
		}
	}
	pp08 := seen["TestPP08Bandwidth/WRITE/1048576 [gpu01]"]
	require.NotEmpty(t, pp08)
	assert.True(t, strings.HasPrefix(pp08, "PP-08 must on gpu01: bw 12.1 Gbit/s < floor 75 Gbit/s (75% of port rate): RDMA WRITE of 1 MiB from GPU memory reaches 12.1 Gbit/s\n"+
		"remedy: check the NIC's PCIe link (TOPO-04)\npart: nic: mlx5_0; low confidence: "), pp08)
	assert.Less(t, strings.Index(pp08, "remedy:"), strings.Index(pp08, "[[PROPERTY|gdr.bw_gbit_s=12.1]]"), "evidence after the reason")
	assert.Contains(t, pp08, "pingpong_test.go:300:", "the output is in the evidence")
	gpu09 := seen["TestGPU09HtoDBandwidth/0000:00:06.0 [gpu02]"]
	assert.True(t, strings.HasPrefix(gpu09, "GPU-09 must on gpu02: copy_fraction 0.319 < floor 0.600: GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60\n"+
		"remedy: check the GPU link (GPU-11)\n"), "a recording without gdr.measured: the first number with a threshold: %s", gpu09)
	notRun := seen["INST-01 (not run) [gpu02]"]
	assert.True(t, strings.HasPrefix(notRun, "INST-01 must on gpu02: not run: "), notRun)
}

// Report-only requirements skip, not_judged is an error, fell_short and
// no outcome are failures, a package that did not build and a run error
// are errors; suite counts follow.
func TestJUnitOutcomes(t *testing.T) {
	b := junitOf(t, Build([]Run{verdictHost("gpu01")}))
	doc := parseJUnit(t, b)
	cases := map[string]JUnitCase{}
	suites := suitesByName(doc)
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			cases[c.Name] = c
		}
	}
	pp08 := cases["TestPP08Bandwidth/WRITE/1048576 [gpu01]"]
	require.NotNil(t, pp08.Failure)
	assert.Equal(t, "fell_short", pp08.Failure.Type)
	pp03 := cases["TestPP03Write [gpu01]"]
	require.NotNil(t, pp03.Error, "the suite could not judge: an error")
	assert.Equal(t, "PP-03 must on gpu01: peer gpu02 vanished", pp03.Error.Message)
	pp04 := cases["TestPP04Read [gpu01]"]
	require.NotNil(t, pp04.Failure, "no gdr.outcome counts as fell_short")
	assert.Equal(t, "PP-04 must on gpu01: READ data differs at byte 7; remedy: check the NIC firmware", pp04.Failure.Message, "a recording without gdr.cause: its line is the cause")
	pp09 := cases["TestPP09HostVsGPU [gpu01]"]
	require.NotNil(t, pp09.Skipped, "a report-only requirement never fails a build")
	assert.Nil(t, pp09.Failure)
	assert.Equal(t, "report-only, not met: PP-09 on gpu01: GPU memory reaches 0.41 of host memory's bandwidth; remedy: check the path class (TOPO-02)", pp09.Skipped.Message)
	// A package that did not build takes its requirements down: one error
	// case each (the summary counts each as failed), the reason the
	// compiler's own first error, not go build's "# package" header.
	_, noPkg := cases["(package) [gpu01]"]
	assert.False(t, noPkg, "its requirements carry the failure")
	gpu01 := cases["GPU-01 (package failed) [gpu01]"]
	require.NotNil(t, gpu01.Error, "a package that did not build was not judged")
	assert.Equal(t, typeNotJudged, gpu01.Error.Type)
	assert.Equal(t, "GPU-01 must on gpu01: conformance/gpu did not build: gpu_test.go:3:2: undefined: cuda.Foo", gpu01.Error.Message)
	assert.Contains(t, gpu01.Error.Data, "undefined: cuda.Foo")
	gpuReqs := 0
	for _, rq := range reqs.All() {
		if rq.Area == "gpu" {
			gpuReqs++
			assert.Contains(t, cases, rq.ID+" (package failed) [gpu01]")
		}
	}
	assert.Equal(t, gpuReqs, suites["gpu01/gpu"].Errors)
	run := cases["(run) [gpu01]"]
	require.NotNil(t, run.Error)
	assert.Equal(t, "the VM died", run.Error.Message)

	pp := suites["gpu01/pingpong"]
	assert.Equal(t, 2, pp.Failures, "PP-08 and PP-04")
	assert.Equal(t, 1, pp.Errors, "PP-03")
	assert.GreaterOrEqual(t, pp.Skipped, 1, "PP-09, and the requirements that did not run")
	assert.Equal(t, "2026-12-01T21:30:05", pp.Timestamp, "the run's first event, in UTC")
	props := map[string]string{}
	for _, p := range *pp.Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, "v1.4.0-3-gabc", props["gdr.suite_version"], "the suite version the host ran")
	assert.Equal(t, "events", props["gdr.timestamp_source"])
	assert.Equal(t, "github.com/gdrconf/gdrconf/conformance/pingpong", pp.Package)
}

// Without event times the timestamp is host.json's, then the report's
// build time, and the suite says which.
func TestJUnitTimestampFallbacks(t *testing.T) {
	pass := events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}})
	r := Build([]Run{{Host: Identity{Host: "a", Time: "2026-11-30T10:00:00+02:00"}, Events: pass}})
	s := parseJUnit(t, junitOf(t, r)).Suites[0]
	assert.Equal(t, "2026-11-30T08:00:00", s.Timestamp)
	assert.Contains(t, *s.Properties, junit.Property{Name: "gdr.timestamp_source", Value: "host.json"})
	r = Build([]Run{{Host: Identity{Host: "a"}, Events: pass}})
	r.Time = "2026-11-29T01:02:03Z"
	s = parseJUnit(t, junitOf(t, r)).Suites[0]
	assert.Equal(t, "2026-11-29T01:02:03", s.Timestamp)
	assert.Contains(t, *s.Properties, junit.Property{Name: "gdr.timestamp_source", Value: "report build time"})
}

func TestCleanEscapesVisibly(t *testing.T) {
	assert.Equal(t, `a\x01b\x1b[0m \xff \ufffe`+"\tok\n", clean("a\x01b\x1b[0m \xff \uFFFE\tok\n"))
	assert.Equal(t, "µs ✓", clean("µs ✓"))
	b := junitOf(t, constructedReports(t)["control"])
	assert.NotContains(t, string(b), "\uFFFD", "xunit-viewer crashed on U+FFFD")
	assert.Contains(t, string(b), `printed \x01\x1b[0m`)
	assert.Contains(t, string(b), `gdr.note=bell\x07`)
}

// A file this package writes reads back (ReadJUnit) into the same cases:
// names, results, attributes and output; and the suite's timestamp.
func TestJUnitReadsBackWhatItWrites(t *testing.T) {
	orig := Build([]Run{verdictHost("gpu01"), gpuHost("gpu02")})
	evs, err := ReadJUnit(bytes.NewReader(junitOf(t, orig)))
	require.NoError(t, err)
	for _, h := range orig.Hosts {
		var mine []Event
		for _, e := range evs {
			if strings.HasPrefix(e.Package, h.Identity.Host+"/") {
				mine = append(mine, e)
			}
		}
		back := Build([]Run{{Host: h.Identity, Events: mine}}).Hosts[0]
		got := map[string]*Case{}
		for _, c := range back.Cases() {
			got[c.Name] = c
		}
		n := 0
		for _, c := range h.Cases() {
			b := got[c.Name]
			require.NotNil(t, b, "%s of %s reads back", c.Name, h.Identity.Host)
			n++
			assert.Equal(t, c.Status(), b.Status(), c.Name)
			want := withAttr(c.Attrs, "gdr.level", b.Attrs["gdr.level"])
			if c.Part != nil { // the part a failure points at travels as gdr.part
				want = withAttr(want, "gdr.part", c.Part.String())
			}
			assert.Equal(t, want, b.Attrs, c.Name)
			assert.Equal(t, noAttrLines(c.Output), noAttrLines(b.Output), c.Name)
			assert.Equal(t, c.Message, b.Message, c.Name)
		}
		assert.Greater(t, n, 2)
		if h.Identity.Host == "gpu01" {
			first := time.Time{}
			for _, p := range back.pkgs {
				if !p.Timestamp.IsZero() {
					first = p.Timestamp
				}
			}
			assert.Equal(t, "2026-12-01T21:30:05", first.Format(junitTime))
		}
	}
	// Older files (gotestsum's, properties inside cases) still read.
	runs, err := LoadDir(filepath.Join(runsDir, "h200-gdr"))
	require.NoError(t, err)
	assert.NotEmpty(t, Build(runs).Hosts[0].Cases())
}

func noAttrLines(l []string) []string {
	var out []string
	for _, s := range l {
		if !strings.HasPrefix(s, "=== ATTR ") {
			out = append(out, s)
		}
	}
	return out
}

func regexpReplaceFirst(s, re, repl string) string {
	rx := regexp.MustCompile(re)
	loc := rx.FindStringSubmatchIndex(s)
	if loc == nil {
		return s
	}
	return s[:loc[0]] + string(rx.ExpandString(nil, repl, s, loc)) + s[loc[1]:]
}

// The operator between a value and its threshold is the one that holds:
// a case the suite could not judge read "copy_fraction 0.876 < floor
// 0.600" when 0.876 was above its floor.
func TestCompareOp(t *testing.T) {
	for _, c := range []struct{ v, th, want string }{
		{"12.1", "floor 75 Gbit/s (75% of port rate)", "<"},
		{"0.876", "floor 0.600", ">="},
		{"0.600", "floor 0.600", ">="},
		{"4.2", "ceiling 3.5 us", ">"},
		{"1.1", "ceiling 3.5 us", "<="},
		{"n/a", "floor 1", "vs"},
		{"1", "floor x", "vs"},
		{"1", "limit 2", "vs"},
		{"1", "", "vs"},
	} {
		assert.Equal(t, c.want, compareOp(c.v, c.th), "%s vs %s", c.v, c.th)
	}
}

// gotestsum's suite timestamps carry a zone; Ant's (and ours) do not. Both
// are the run's own time.
func TestSuiteTime(t *testing.T) {
	for in, want := range map[string]string{
		"2026-12-01T13:28:00":       "2026-12-01T13:28:00Z",
		"2026-12-01T13:28:00Z":      "2026-12-01T13:28:00Z",
		"2026-12-01T14:28:00+01:00": "2026-12-01T13:28:00Z",
		"2026-12-01T13:28:00.5Z":    "2026-12-01T13:28:00.5Z",
	} {
		got, ok := suiteTime(in)
		require.True(t, ok, in)
		assert.Equal(t, want, got.Format(time.RFC3339Nano), in)
	}
	_, ok := suiteTime("yesterday")
	assert.False(t, ok)
}

// One count of cases everywhere: summary's "(N test cases)" is the number
// of JUnit testcases of the host, for every recorded run and for a run
// with a package that did not build, a run error and requirements that did
// not run (summary said 55 where JUnit had 58).
func TestCaseCountsAgree(t *testing.T) {
	check := func(name string, r *Report) {
		doc := r.JUnit()
		perHost := map[string]int{}
		for _, s := range doc.Suites {
			if s.Hostname != "" && !strings.HasPrefix(s.Name, "cluster/") {
				perHost[s.Hostname] += len(s.Testcases)
			}
		}
		for _, h := range r.Hosts {
			host := h.Identity.Host
			if strings.TrimSpace(host) == "" {
				host = "localhost"
			}
			assert.Equal(t, perHost[host], h.Counts().Cases, "%s: host %s", name, host)
		}
	}
	check("verdictHost", Build([]Run{verdictHost("gpu01")}))
	ents, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			runs, err := LoadDir(filepath.Join(runsDir, e.Name()))
			require.NoError(t, err)
			check(e.Name(), Build(runs))
		}
	}
}

// A file this package wrote before one suite per case (a suite per host
// and area, every case's block in its system-out, as recorded on the H200
// machine) still reads back into the cases its test.json gives: names,
// results and attributes.
func TestJUnitReadsASuitePerArea(t *testing.T) {
	for _, name := range []string{"h200-structured-strict", "h200-inventory"} {
		dir := filepath.Join(runsDir, name)
		f, err := os.Open(filepath.Join(dir, JUnitFile))
		require.NoError(t, err)
		evs, err := ReadJUnit(f)
		f.Close()
		require.NoError(t, err)
		runs, err := LoadDir(dir) // test.json
		require.NoError(t, err)
		want := Build(runs).Hosts[0]
		back := Build([]Run{{Host: want.Identity, Events: evs}}).Hosts[0]
		got := map[string]*Case{}
		for _, c := range back.Cases() {
			got[c.Name] = c
		}
		n := 0
		for _, c := range want.Cases() {
			if !c.Counted {
				continue
			}
			b := got[c.Name]
			require.NotNil(t, b, "%s: %s reads back", name, c.Name)
			n++
			assert.Equal(t, c.Status(), b.Status(), "%s: %s", name, c.Name)
			for k, v := range c.Attrs {
				assert.Equal(t, v, b.Attrs[k], "%s: %s %s", name, c.Name, k)
			}
		}
		assert.Greater(t, n, 40, name)
	}
}

// junit.xml is written a suite at a time (a fleet's is hundreds of MB):
// byte for byte the document JUnit() builds, written whole by
// go-junit-report's WriteXML; a report with no host too.
func TestJUnitStreamedIsTheDocument(t *testing.T) {
	cluster, err := FromDirs([]string{clusterFolder(t, map[string]int{"vm2": 1})}, Options{})
	require.NoError(t, err)
	for name, r := range map[string]*Report{"fleet": Build(fleetRuns(t, 16, 3)), "cluster": cluster,
		"one host": Build([]Run{verdictHost("gpu01")}), "no host": Build(nil)} {
		r.Time = "2026-12-04T00:00:00Z"
		var streamed, whole bytes.Buffer
		require.NoError(t, r.WriteJUnit(&streamed))
		whole.WriteString(xml.Header)
		doc := r.JUnit()
		require.NoError(t, doc.WriteXML(&whole))
		assert.Equal(t, whole.String(), streamed.String(), name)
	}
}

func withAttr(a map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(a)+1)
	for key, val := range a {
		out[key] = val
	}
	out[k] = v
	return out
}

// Property lines: the map's, with pairs set over it (the map unchanged),
// in the order the map with those pairs set in a copy gives: the judged
// value and its bound, the facts, the rest by key.
func TestPropLines(t *testing.T) {
	a := map[string]string{"gdr.req": "PP-08", "gdr.level": "x", "gdr.bw_gbit_s": "1", "gdr.zz": "z"}
	assert.Equal(t, []string{propLine("gdr.part", "NIC mlx5_0"), propLine("gdr.req", "PP-08"), propLine("gdr.level", "must"), propLine("gdr.bw_gbit_s", "1"), propLine("gdr.zz", "z")},
		propLines(a, "gdr.level", "must", "gdr.part", "NIC mlx5_0"))
	assert.Equal(t, "x", a["gdr.level"], "the map is not changed")
	assert.Equal(t, []string{propLine("gdr.req", "GPU-01"), propLine("gdr.level", "must")}, propLines(nil, "gdr.level", "must", "gdr.req", "GPU-01"))
	assert.Empty(t, propLines(nil))
	m := map[string]string{"gdr.measured": "gdr.bw_gbit_s", "gdr.threshold": "gdr.min_bw_gbit_s", "gdr.bw_gbit_s": "1", "gdr.min_bw_gbit_s": "75", "gdr.cause": "c", "gdr.a": "a"}
	for _, more := range [][]string{nil, {"gdr.level", "must"}, {"gdr.part", "p", "gdr.level", "must"}, {"gdr.cause", "d"}, {"gdr.measured", "gdr.a"}, {"gdr.b", "b", "gdr.b", "c"}} {
		want := m
		for i := 0; i+1 < len(more); i += 2 {
			want = withAttr(want, more[i], more[i+1])
		}
		assert.Equal(t, propLines(want), propLines(m, more...), "%v", more)
	}
}
