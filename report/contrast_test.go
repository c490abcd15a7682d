package report

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wcagAA is the least contrast WCAG 2.x level AA asks of body text
// (success criterion 1.4.3).
const wcagAA = 4.5

// rgb is an sRGB colour, each channel 0..1.
type rgb [3]float64

// parseColour reads the colour forms the report writes: #rgb, #rrggbb,
// rgb(r, g, b) and hsl(h,s%,l%). ok is false for anything else.
func parseColour(s string) (c rgb, ok bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch {
	case strings.HasPrefix(s, "#") && (len(s) == 4 || len(s) == 7):
		h := s[1:]
		if len(h) == 3 {
			h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
		}
		for i := 0; i < 3; i++ {
			v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
			if err != nil {
				return c, false
			}
			c[i] = float64(v) / 255
		}
		return c, true
	case strings.HasPrefix(s, "rgb(") && strings.HasSuffix(s, ")"):
		f := strings.Split(s[4:len(s)-1], ",")
		if len(f) != 3 {
			return c, false
		}
		for i := range f {
			v, err := strconv.ParseFloat(strings.TrimSpace(f[i]), 64)
			if err != nil {
				return c, false
			}
			c[i] = v / 255
		}
		return c, true
	case strings.HasPrefix(s, "hsl(") && strings.HasSuffix(s, ")"):
		f := strings.Split(s[4:len(s)-1], ",")
		if len(f) != 3 {
			return c, false
		}
		var v [3]float64
		for i := range f {
			x, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f[i]), "%"), 64)
			if err != nil {
				return c, false
			}
			v[i] = x
		}
		// CSS Color 4, "Converting HSL Colors to sRGB".
		h, sat, l := math.Mod(v[0], 360), v[1]/100, v[2]/100
		a := sat * math.Min(l, 1-l)
		for i, n := range []float64{0, 8, 4} {
			k := math.Mod(n+h/30, 12)
			c[i] = l - a*math.Max(-1, math.Min(math.Min(k-3, 9-k), 1))
		}
		return c, true
	}
	return c, false
}

// contrast is the WCAG 2.x contrast ratio of two colours: (L1 + 0.05) /
// (L2 + 0.05) of their relative luminances, the lighter over the darker.
func contrast(a, b rgb) float64 {
	lum := func(c rgb) float64 {
		var l float64
		for i, w := range []float64{0.2126, 0.7152, 0.0722} {
			v := c[i]
			if v <= 0.04045 {
				v /= 12.92
			} else {
				v = math.Pow((v+0.055)/1.055, 2.4)
			}
			l += w * v
		}
		return l
	}
	la, lb := lum(a), lum(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

// cssRule is one rule of the page's stylesheet and the colours it sets.
type cssRule struct {
	Selector, Color, Background string
}

var (
	styleBlock = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	styleAttr  = regexp.MustCompile(`style="([^"]*)"`)
	svgFill    = regexp.MustCompile(`<text[^>]*\sfill="([^"]+)"`)
)

// declColours reads color and background(-color) from a declaration list;
// a background that is no colour (none, transparent, an image) is left out.
func declColours(decls string) (color, background string) {
	for _, d := range strings.Split(decls, ";") {
		k, v, ok := strings.Cut(d, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "color":
			color = strings.TrimSpace(v)
		case "background", "background-color":
			v = strings.TrimSpace(v)
			if v != "none" && v != "transparent" && !strings.Contains(v, "url(") {
				background = v
			}
		}
	}
	return color, background
}

// cssRules are the page's rules that set a colour.
func cssRules(page string) []cssRule {
	m := styleBlock.FindStringSubmatch(page)
	if m == nil {
		return nil
	}
	var out []cssRule
	for _, r := range strings.Split(m[1], "}") {
		sel, decls, ok := strings.Cut(r, "{")
		if !ok {
			continue
		}
		if c, b := declColours(decls); c != "" || b != "" {
			out = append(out, cssRule{Selector: strings.TrimSpace(sel), Color: c, Background: b})
		}
	}
	return out
}

// pageContrast lists every text/background pair of the page below AA: the
// stylesheet's rules that set both; every text colour a rule sets alone
// against every background set alone (the surfaces it can sit on: body,
// tables, tinted rows, boxes), the body's text among them; inline styles
// the same way; SVG text fills against the SVG's white.
func pageContrast(t *testing.T, page string) (checked int, bad []string) {
	t.Helper()
	colour := func(where, s string) rgb {
		c, ok := parseColour(s)
		require.True(t, ok, "%s: colour %q is not one this test reads", where, s)
		return c
	}
	check := func(fg, bg, what string) {
		checked++
		if r := contrast(colour(what, fg), colour(what, bg)); r < wcagAA {
			bad = append(bad, fmt.Sprintf("%s on %s: %.2f:1 (%s)", fg, bg, r, what))
		}
	}
	rules := cssRules(page)
	require.NotEmpty(t, rules, "the page's stylesheet")
	var texts, surfaces, inline []cssRule
	body := "#1f2328"
	for _, r := range rules {
		switch {
		case r.Color != "" && r.Background != "":
			check(r.Color, r.Background, r.Selector)
			if r.Selector == "body" {
				texts, surfaces, body = append(texts, r), append(surfaces, r), r.Color
			}
		case r.Color != "":
			texts = append(texts, r)
		default:
			surfaces = append(surfaces, r)
		}
	}
	for _, a := range styleAttr.FindAllStringSubmatch(page, -1) {
		c, b := declColours(a[1])
		switch {
		case c != "" && b != "":
			check(c, b, `style="`+a[1]+`"`)
		case c != "":
			texts = append(texts, cssRule{Selector: `style="` + a[1] + `"`, Color: c})
		case b != "":
			// A cell the page colours itself (the heatmaps) holds plain
			// text: the body's colour on it.
			inline = append(inline, cssRule{Selector: `style="` + a[1] + `"`, Background: b})
		}
	}
	seen := map[string]bool{}
	for _, tx := range texts {
		for _, s := range surfaces {
			if k := tx.Color + " " + s.Background; !seen[k] {
				seen[k] = true
				check(tx.Color, s.Background, tx.Selector+" on "+s.Selector)
			}
		}
	}
	for _, s := range inline {
		if k := body + " " + s.Background; !seen[k] {
			seen[k] = true
			check(body, s.Background, "body text on "+s.Selector)
		}
	}
	for _, f := range svgFill.FindAllStringSubmatch(page, -1) {
		if k := f[1] + " svg"; !seen[k] {
			seen[k] = true
			check(f[1], "#fff", "SVG text")
		}
	}
	return checked, bad
}

// Every text and background colour pair of the page reaches WCAG AA
// (4.5:1): one host that failed, a 64-host fleet, and hosts with a PCIe
// tree, a pair table, a heatmap and charts. Skip cells were white on amber
// (2.24:1), not-run cells 4.40:1, the PXB, PHB and NODE labels 3.1-3.8:1.
func TestPageContrast(t *testing.T) {
	// The arithmetic first: the test is not blind.
	white, _ := parseColour("#fff")
	black, _ := parseColour("#000000")
	assert.InDelta(t, 21, contrast(white, black), 0.01)
	amber, _ := parseColour("#d4a72c")
	assert.InDelta(t, 2.24, contrast(white, amber), 0.01, "white on the old skip cells")
	hsl, ok := parseColour("hsl(120,45%,78%)")
	require.True(t, ok)
	assert.InDelta(t, 0.681, hsl[0], 0.001) // CSS Color 4's worked conversion: l - s*min(l, 1-l)
	_, bad := pageContrast(t, `<style>body{color:#1f2328;background:#f6f8fa}.m-skip{background:#d4a72c;color:#fff}</style>`)
	assert.Len(t, bad, 1, "a pair below AA is found")

	strict, err := LoadDir(filepath.Join(runsDir, "h200-structured-strict"))
	require.NoError(t, err)
	suite, err := LoadDir(filepath.Join(runsDir, "h200-suite"))
	require.NoError(t, err)
	pages := map[string]*Report{
		"one host": Build(strict),
		"64 hosts": Build(fleetRuns(t, 64, 5, 40)),
		"a pair": Build(append(suite, clusterHost("gpu-a", "10.0.0.1", "client", "10.0.0.2:18515", 360),
			clusterHost("gpu-b", "10.0.0.2", "server", "10.0.0.1:40312", 100))),
	}
	for name, r := range pages {
		var b bytes.Buffer
		require.NoError(t, r.WriteHTML(&b))
		n, bad := pageContrast(t, b.String())
		t.Logf("%s: %d colour pairs checked", name, n)
		assert.Empty(t, bad, "%s: pairs below %.1f:1", name, wcagAA)
	}
	// The heatmap's cells, at every distance from the floor, under the body's text.
	body, _ := parseColour("#1f2328")
	for _, p := range []PairBW{{Gbits: 1}, {Gbits: 300, Floor: 300}, {Gbits: 0, Floor: 300, Status: Fail},
		{Gbits: 150, Floor: 300}, {Gbits: 299, Floor: 300, Status: Fail}} {
		_, bg, _ := strings.Cut(strings.Split(string(heatStyle(p)), ";")[0], ":")
		c, ok := parseColour(bg)
		require.True(t, ok, bg)
		assert.GreaterOrEqual(t, contrast(body, c), wcagAA, "heat cell %s", bg)
	}
	for class, c := range classColor {
		assert.GreaterOrEqual(t, contrast(colour(t, c), white), wcagAA, "%s label on white", class)
	}
}

func colour(t *testing.T, s string) rgb {
	t.Helper()
	c, ok := parseColour(s)
	require.True(t, ok, s)
	return c
}
