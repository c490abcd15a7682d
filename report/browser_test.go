package report

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterHost is a synthetic 2-GPU, 2-NIC host (one PCIe switch per GPU and
// NIC pair) that ran topology, copy and pingpong tests as one end of a pair.
func clusterHost(name, addr, role, peer string, gbits float64) Run {
	pkgT := "github.com/gdrconf/gdrconf/conformance/topology"
	var tests []tc
	tests = append(tests, tc{name: "TestTOPO01Inventory", result: "pass", attrs: []string{"gdr.req", "TOPO-01", "gdr.gpus", "0000:1b:00.0, 0000:9b:00.0", "gdr.nics", "mlx5_0, mlx5_1"}})
	gpus := []string{"0000:1b:00.0", "0000:9b:00.0"}
	nics := []string{"0000:1c:00.0", "0000:9c:00.0"}
	chain := func(rp, usp, dsp, dev string) string { return strings.Join([]string{rp, usp, dsp, dev}, " ") }
	gch := []string{chain("0000:00:01.0", "0000:19:00.0", "0000:1a:00.0", gpus[0]), chain("0000:80:01.0", "0000:99:00.0", "0000:9a:00.0", gpus[1])}
	nch := []string{chain("0000:00:01.0", "0000:19:00.0", "0000:1a:01.0", nics[0]), chain("0000:80:01.0", "0000:99:00.0", "0000:9a:01.0", nics[1])}
	for i, g := range gpus {
		for j, n := range nics {
			class := "PXB"
			if i != j {
				class = "SYS"
			}
			tests = append(tests, tc{name: fmt.Sprintf("TestTOPO01Inventory/%s-mlx5_%d", g, j), result: "pass",
				attrs: []string{"gdr.gpu", g, "gdr.nic", fmt.Sprintf("mlx5_%d", j), "gdr.nic_pci", n, "gdr.path", class, "gdr.gpu_chain", gch[i], "gdr.nic_chain", nch[j]}})
		}
	}
	tests = append(tests, tc{name: "TestTOPO02NearestNIC", result: "pass", attrs: []string{"gdr.req", "TOPO-02"}})
	for i, g := range gpus {
		tests = append(tests, tc{name: "TestTOPO02NearestNIC/" + g, result: "pass", attrs: []string{"gdr.gpu", g, "gdr.nic", fmt.Sprintf("mlx5_%d", i), "gdr.nic_pci", nics[i], "gdr.path", "PXB"}})
	}
	evs := events(pkgT, tests...)
	pkgG := "github.com/gdrconf/gdrconf/conformance/gpu"
	tests = nil
	for _, id := range []string{"GPU-09", "GPU-10"} {
		top := map[string]string{"GPU-09": "TestGPU09HtoDBandwidth", "GPU-10": "TestGPU10DtoHBandwidth"}[id]
		tests = append(tests, tc{name: top, result: "pass", attrs: []string{"gdr.req", id}})
		for i, g := range gpus {
			bw := 52.8 + float64(i)
			tests = append(tests, tc{name: top + "/" + g, result: "pass", attrs: []string{"gdr.gpu", g, "gdr.gpu_name", "NVIDIA H200",
				"gdr.copy_gbyte_s", fmt.Sprintf("%.3f", bw), "gdr.link_gbyte_s", "63.015", "gdr.copy_fraction", fmt.Sprintf("%.3f", bw/63.015), "gdr.min_copy_fraction", "0.600"}})
		}
	}
	evs = append(evs, events(pkgG, tests...)...)
	pkgP := "github.com/gdrconf/gdrconf/conformance/pingpong"
	tests = []tc{{name: "TestPP08Bandwidth", result: "pass", attrs: []string{"gdr.req", "PP-08", "gdr.role", role, "gdr.peer", peer}}}
	for _, op := range []string{"WRITE", "READ"} {
		for k, size := range []int{4096, 65536, 1048576} {
			v := gbits * float64(k+1) / 3
			attrs := []string{"gdr.bw_gbit_s", fmt.Sprintf("%.3f", v), "gdr.size_bytes", fmt.Sprint(size), "gdr.op", op}
			if size == 1048576 {
				attrs = append(attrs, "gdr.min_bw_gbit_s", "300.000", "gdr.threshold", "75% of the 400 Gb/s port rate")
			}
			tests = append(tests, tc{name: fmt.Sprintf("TestPP08Bandwidth/%s/%d", op, size), result: "pass", attrs: attrs})
		}
	}
	evs = append(evs, events(pkgP, tests...)...)
	return Run{Host: Identity{Host: name, Addrs: []string{addr}, Role: role, Peer: peer, Kernel: "6.8.0-45-generic", NvidiaDriver: "580.159.04"}, Events: evs}
}

func findBrowser() string {
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

// chromium runs headless Chromium with the flags a closed network needs
// (no background fetches, no first-run or sync work) and an empty profile.
func chromium(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	bin := findBrowser()
	if bin == "" {
		if os.Getenv("GDR_BROWSER_TEST") == "1" || os.Getenv("CI") != "" {
			t.Fatalf("no chromium in PATH: make deps-test (build/deps.sh --test) installs it")
		}
		t.Skip("no chromium in PATH (make deps-test installs it; GDR_BROWSER_TEST=1 makes this a failure)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}
	argv := append(base, args...)
	if nice, err := exec.LookPath("nice"); err == nil {
		// The browser yields the CPU to whatever else runs (a lab's VMs).
		argv, bin = append([]string{"-n", "19", bin}, argv...), nice
	}
	cmd := exec.CommandContext(ctx, bin, argv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	require.NoError(t, cmd.Run(), "chromium: %s", e.String())
	return o.String(), e.String()
}

// errorHook records uncaught errors and console.error calls on the page's
// root element, before the report's own script runs.
const errorHook = `<script>
window.addEventListener("error", function (e) { document.documentElement.setAttribute("data-jserror", String(e.message)); });
(function () { var ce = console.error; console.error = function () { document.documentElement.setAttribute("data-jserror", Array.prototype.join.call(arguments, " ")); ce.apply(console, arguments); }; })();
</script>`

// The HTML report loads in headless Chromium with no script error and shows
// the verdict, the requirement table, the PCIe tree and charts as SVG, the
// host matrix and the pair heatmap.
func TestHTMLInBrowser(t *testing.T) {
	h200, err := LoadDir(filepath.Join(runsDir, "h200-suite"))
	require.NoError(t, err)
	runs := append(h200, clusterHost("gpu-a", "10.0.0.1", "client", "10.0.0.2:18515", 360), clusterHost("gpu-b", "10.0.0.2", "server", "10.0.0.1:40312", 350))
	r := Build(runs)
	var page bytes.Buffer
	require.NoError(t, r.WriteHTML(&page))
	html := page.String()
	assert.NotRegexp(t, `(?i)(src|href)="(https?:)?//`, html, "the report fetches nothing")
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(html, "<head>", "<head>"+errorHook, 1)), 0o644))
	// The hook is not blind: a page that throws is caught.
	control := filepath.Join(dir, "control.html")
	require.NoError(t, os.WriteFile(control, []byte("<!doctype html><html><head>"+errorHook+"</head><body><script>throw new Error('boom')</script></body></html>"), 0o644))
	cdom, _ := chromium(t, "--dump-dom", "file://"+control)
	require.Regexp(t, `<html[^>]*data-jserror="[^"]*boom`, cdom, "the error hook must see a thrown error")

	dom, logs := chromium(t, "--dump-dom", "--virtual-time-budget=3000", "file://"+file)
	if m := regexp.MustCompile(`<html[^>]*data-jserror="([^"]*)"`).FindStringSubmatch(dom); m != nil {
		t.Errorf("script error in the page: %s", m[1])
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "Uncaught") || strings.Contains(l, ":CONSOLE(") && strings.Contains(l, "ERROR") {
			t.Errorf("browser console: %s", l)
		}
	}
	assert.Regexp(t, `<body[^>]*data-ready="1"`, dom[:min(len(dom), 20000)], "the report's script ran")
	assert.Contains(t, dom, `id="verdict"><div class="line">INCOMPLETE (3 of 3 hosts not fully run: h200-suite, gpu-a, gpu-b)</div>`)
	assert.NotContains(t, dom, "ZgotmplZ", "html/template refused a value")
	assert.Contains(t, dom, `<table class="reqs">`)
	assert.Equal(t, 3, strings.Count(dom, `<table class="reqs">`), "one requirement table per host")
	assert.GreaterOrEqual(t, len(regexp.MustCompile(`<tr class="s-`).FindAllString(dom, -1)), 3*46)
	assert.Contains(t, dom, `<svg class="tree"`)
	assert.Contains(t, dom, `class="node gpu"`)
	assert.Contains(t, dom, `class="node nic"`)
	assert.Contains(t, dom, `>PXB</text>`, "the nearest-NIC arcs carry the path class")
	assert.Equal(t, 2, strings.Count(dom, `<svg class="chart"`), "bandwidth and copy charts")
	assert.Contains(t, dom, `id="matrix"`)
	assert.Contains(t, dom, `id="heatmap"`)
	assert.Contains(t, dom, `>360</td>`, "gpu-a -> gpu-b WRITE at the largest size")
	if shot := os.Getenv("GDR_REPORT_SCREENSHOT"); shot != "" {
		// The page too, to look at other parts of it by hand.
		require.NoError(t, os.WriteFile(strings.TrimSuffix(shot, ".png")+".html", []byte(html), 0o644))
		chromium(t, "--hide-scrollbars", "--window-size=1400,3000", "--screenshot="+shot, "file://"+file)
	}
}

// fleetSizes are the merges the browser test renders and, with
// GDR_REPORT_SHOTS=<folder>, screenshots: the report of each is kept there
// with its png, to be looked at.
var fleetSizes = []int{1, 5, 64, 1024}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// foldProbe writes on the root element where the causes block starts and
// where its first cause ends, against the window's height, once the page
// has laid out.
const foldProbe = `<script>window.addEventListener("load",function(){
var b=document.getElementById("causes"),c=b&&b.querySelector(".cause");
document.documentElement.setAttribute("data-fold",b&&c?[Math.round(b.getBoundingClientRect().top),Math.round(c.getBoundingClientRect().bottom),window.innerHeight,document.documentElement.scrollHeight].join(" "):"none");});</script>`

// contrastProbe computes, for every element that holds text, the contrast
// of its computed colour (an SVG text's fill) against the first opaque
// background behind it (WCAG 2.x relative luminance), and writes how many
// it checked and the pairs below 4.5:1 on the root element.
const contrastProbe = `<script>window.addEventListener("load",function(){
function rgb(s){var m=/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/.exec(s);return m?{c:[+m[1],+m[2],+m[3]],a:m[4]===undefined?1:+m[4]}:null}
function lum(c){var l=0,w=[0.2126,0.7152,0.0722];for(var i=0;i<3;i++){var v=c[i]/255;v=v<=0.04045?v/12.92:Math.pow((v+0.055)/1.055,2.4);l+=w[i]*v}return l}
var cache=new Map();
function bg(el){for(var e=el;e&&e.nodeType===1;e=e.parentElement){if(cache.has(e))return cache.get(e);var b=rgb(getComputedStyle(e).backgroundColor);if(b&&b.a===1){cache.set(e,b.c);return b.c}}return [255,255,255]}
var n=0,bad={},list=[];
document.querySelectorAll("body *").forEach(function(el){
 var t=el.tagName.toLowerCase();if(t==="script"||t==="style"||t==="title")return;
 var has=false;for(var k=el.firstChild;k;k=k.nextSibling){if(k.nodeType===3&&k.nodeValue.trim()){has=true;break}}
 if(!has)return;
 var s=getComputedStyle(el),f=rgb(el instanceof SVGElement?s.fill:s.color);if(!f)return;
 var b=bg(el),l1=lum(f.c),l2=lum(b),r=(Math.max(l1,l2)+0.05)/(Math.min(l1,l2)+0.05);n++;
 if(r<4.5){var key=f.c+" on "+b;if(!bad[key]){bad[key]=1;list.push(key+" "+r.toFixed(2)+":1 ("+t+"."+String(el.getAttribute("class")||"")+")")}}
});
document.documentElement.setAttribute("data-contrast",n+";"+list.join("|"));});</script>`

// widthProbe writes the page's width on the root element, so that the
// dump says whether anything scrolls sideways; it is not blind to a wide
// page (TestFleetHTMLInBrowser).
const widthProbe = `<script>window.addEventListener("load",function(){document.documentElement.setAttribute("data-scrollwidth",String(document.documentElement.scrollWidth));});</script>`

// scrollWidth is what widthProbe wrote in dom.
func scrollWidth(t *testing.T, dom string) int {
	t.Helper()
	m := regexp.MustCompile(`data-scrollwidth="(\d+)"`).FindStringSubmatch(dom[:min(len(dom), 4000)])
	require.NotNil(t, m, "the width probe ran")
	w, _ := strconv.Atoi(m[1])
	return w
}

// A fleet's report renders in Chromium with its verdict naming the failing
// hosts, and no part of it is wider than a 1400 px window. The causes of
// the failures and what to do are above the fold (the first cause ends
// within the window's height), and every element's text reaches 4.5:1
// against its background.
func TestFleetHTMLInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("renders merges up to 1024 hosts (-short skips it)")
	}
	shots := os.Getenv("GDR_REPORT_SHOTS")
	probe := widthProbe
	wide := filepath.Join(t.TempDir(), "wide.html")
	require.NoError(t, os.WriteFile(wide, []byte("<!doctype html><html><head>"+probe+"</head><body><table><tr><td>"+strings.Repeat("x", 600)+"</td></tr></table></body></html>"), 0o644))
	wdom, _ := chromium(t, "--dump-dom", "--window-size=1400,900", "--virtual-time-budget=2000", "file://"+wide)
	require.Greater(t, scrollWidth(t, wdom), 1400, "the probe must see an unbreakable string")
	// Nor is the contrast probe blind: white on the old skip cells' amber is 2.24:1.
	amber := filepath.Join(t.TempDir(), "amber.html")
	require.NoError(t, os.WriteFile(amber, []byte("<!doctype html><html><head>"+contrastProbe+`</head><body><p style="background:#d4a72c;color:#fff">S</p><p>fine</p></body></html>`), 0o644))
	adom, _ := chromium(t, "--dump-dom", "--virtual-time-budget=2000", "file://"+amber)
	require.Contains(t, adom, `data-contrast="2;255,255,255 on 212,167,44 2.24:1 (p.)"`, "the contrast probe must see white on amber")
	for _, n := range fleetSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var failing []int
			for _, f := range []int{3, 100, 509, 1000} {
				if f < n {
					failing = append(failing, f)
				}
			}
			if n == 1 {
				failing = []int{0}
			}
			r := Build(fleetRuns(t, n, failing...))
			var page bytes.Buffer
			require.NoError(t, r.WriteHTML(&page))
			dir := shots
			if dir == "" {
				dir = t.TempDir()
			}
			require.NoError(t, os.MkdirAll(dir, 0o755))
			file := filepath.Join(dir, fmt.Sprintf("fleet-%04d.html", n))
			require.NoError(t, os.WriteFile(file, []byte(strings.Replace(page.String(), "<head>", "<head>"+errorHook+probe+foldProbe+contrastProbe, 1)), 0o644))
			dom, _ := chromium(t, "--dump-dom", "--window-size=1400,900", "--virtual-time-budget=5000", "file://"+file)
			head := dom[:min(len(dom), 8000)]
			assert.NotRegexp(t, `data-jserror=`, head)
			fold := regexp.MustCompile(`data-fold="(\d+) (\d+) (\d+) (\d+)"`).FindStringSubmatch(head)
			require.NotNil(t, fold, "the causes block is on the page and the probe ran")
			top, end, height := atoi(t, fold[1]), atoi(t, fold[2]), atoi(t, fold[3])
			t.Logf("%d hosts: causes block top %d px, first cause ends at %d px, window %d px high, page %s px long", n, top, end, height, fold[4])
			assert.Less(t, end, height, "the first cause and its remedy are above the fold")
			cm := regexp.MustCompile(`data-contrast="(\d+);([^"]*)"`).FindStringSubmatch(head)
			require.NotNil(t, cm, "the contrast probe ran")
			t.Logf("%d hosts: %s elements with text checked for contrast", n, cm[1])
			assert.Greater(t, atoi(t, cm[1]), 50, "the contrast probe saw the page's text")
			assert.Empty(t, cm[2], "text below 4.5:1 against its background")
			assert.Contains(t, dom, `<div class="line">`+template.HTMLEscapeString(r.Verdict.Line)+`</div>`)
			if n > 1 {
				assert.Contains(t, r.Verdict.Line, fmt.Sprintf("node%04d", failing[0]), "the headline names the failing hosts")
			}
			assert.LessOrEqual(t, scrollWidth(t, dom), 1400, "the page scrolls sideways at 1400 px")
			if shots != "" {
				chromium(t, "--hide-scrollbars", "--window-size=1400,4000", "--screenshot="+strings.TrimSuffix(file, ".html")+".png", "file://"+file)
			}
		})
	}
}
