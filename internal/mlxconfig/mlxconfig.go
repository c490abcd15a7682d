// Package mlxconfig reads the firmware configuration of NVIDIA (Mellanox)
// NICs as `mstconfig -d <pci> -e query` (Debian's mstflint) or `mlxconfig
// -d <dev> -e query` (NVIDIA MFT) print it, and judges the settings that
// decide GPUDirect RDMA performance against the values NVIDIA documents.
// It only ever queries: the suite never sets firmware configuration.
//
// The table's layout (mstflint mlxconfig/mlxcfg_ui.cpp, read at v4.21 and
// v4.31): an opening block ("Device #1:", "Device type:", "Name:",
// "Description:", "Device:"), a header "Configurations:" followed by
// "Next Boot" or, with -e where the firmware supports it, "Default Current
// Next Boot", then one line per parameter: an eight-character prefix ('*'
// where the next value differs, "RO" for read-only), the name, and one value
// per column ("True(1)", "force_relax(1)", "44", "Array[0..15]"). Column
// widths changed between releases and long enum values overflow their cell,
// so values are split on white space, never by position. Errors go to
// stdout as "-E- <text>"; not root and no such device both print "-E- Failed
// to open the device" (mtcr_ul checks geteuid before anything else).
package mlxconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Query is one device's parsed query.
type Query struct {
	DeviceType  string // "ConnectX7" (mstflint's dm_dev_type2str spelling)
	Name        string // board part number as the firmware reports it
	Description string
	Device      string // as passed to -d
	// Columns are the value columns the header named: ["Next Boot"] or
	// ["Default", "Current", "Next Boot"].
	Columns []string
	Params  map[string]Param
	// Notes are the tool's remarks after the table (firmware that cannot
	// report current values, TLVs that failed to query).
	Notes []string
}

// Param is one parameter's values; a column the output did not have is "".
type Param struct {
	Name                   string
	Default, Current, Next string
	ReadOnly, Modified     bool
}

// Effective is the value in force now: Current when the tool printed it,
// else Next Boot (what the firmware will load; without -e it is all a query
// shows, and it equals the current value unless someone set it since boot).
func (p Param) Effective() string {
	if p.Current != "" {
		return p.Current
	}
	return p.Next
}

// Pending reports a value set but not yet in force (a reboot or firmware
// reset is due).
func (p Param) Pending() bool { return p.Current != "" && p.Next != "" && p.Current != p.Next }

// ToolError is a "-E-" line the tool printed instead of a table.
type ToolError struct{ Msg string }

func (e *ToolError) Error() string { return "mlxconfig: " + e.Msg }

// ErrOpen is the error both "not root" and "no such device" give.
const ErrOpen = "Failed to open the device"

var paramName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\[\d+\])?$`)

// Parse parses the output of one device's query.
func Parse(out string) (*Query, error) {
	q := &Query{Params: map[string]Param{}}
	inTable := false
	var errs []string
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			continue
		case strings.HasPrefix(trim, "-E-"):
			errs = append(errs, strings.TrimSpace(strings.TrimPrefix(trim, "-E-")))
			inTable = false
			continue
		case strings.HasPrefix(trim, "Configurations:"):
			switch cols := strings.Join(strings.Fields(strings.TrimPrefix(trim, "Configurations:")), " "); cols {
			case "Next Boot":
				q.Columns = []string{"Next Boot"}
			case "Default Current Next Boot":
				q.Columns = []string{"Default", "Current", "Next Boot"}
			default:
				return q, fmt.Errorf("unknown configuration header %s", clip.Quote(trim))
			}
			inTable = true
			continue
		}
		if !inTable {
			for _, h := range []struct {
				label string
				dst   *string
			}{{"Device type:", &q.DeviceType}, {"Name:", &q.Name}, {"Description:", &q.Description}, {"Device:", &q.Device}} {
				if v, ok := strings.CutPrefix(trim, h.label); ok {
					*h.dst = strings.TrimSpace(v)
				}
			}
			continue
		}
		f := strings.Fields(line)
		p := Param{}
		for len(f) > 0 && (f[0] == "*" || f[0] == "RO" || f[0] == "*RO") {
			p.Modified = p.Modified || strings.Contains(f[0], "*")
			p.ReadOnly = p.ReadOnly || strings.Contains(f[0], "RO")
			f = f[1:]
		}
		if len(f) < 2 || !paramName.MatchString(f[0]) {
			// Prose after the table ("The '*' shows parameters ...",
			// "Device Firmware does not support reading ...").
			inTable = !strings.HasPrefix(trim, "The ")
			q.Notes = append(q.Notes, trim)
			continue
		}
		p.Name, f = f[0], f[1:]
		switch {
		case len(q.Columns) == 3 && len(f) == 3:
			p.Default, p.Current, p.Next = f[0], f[1], f[2]
		case len(f) == 1:
			p.Next = f[0]
		default:
			return q, fmt.Errorf("parameter %s: %d values under %d columns in %s", p.Name, len(f), len(q.Columns), clip.Quote(trim))
		}
		q.Params[p.Name] = p
	}
	if len(q.Params) == 0 {
		if len(errs) > 0 {
			return q, &ToolError{Msg: strings.Join(errs, "; ")}
		}
		return q, fmt.Errorf("no configuration table in %s", clip.QuoteN(out, 200))
	}
	if len(errs) > 0 {
		q.Notes = append(q.Notes, errs...)
	}
	return q, nil
}

// Number is the numeric part of a value: 44 for "44", 1 for "True(1)" or
// "force_relax(1)"; false for "Array[0..15]", "N/A" or anything else.
func Number(v string) (int64, bool) {
	if i := strings.LastIndexByte(v, '('); i >= 0 && strings.HasSuffix(v, ")") {
		v = v[i+1 : len(v)-1]
	}
	n, err := strconv.ParseInt(v, 0, 64)
	return n, err == nil
}

// Name is the textual part of a value: "force_relax" for "force_relax(1)";
// the value itself when it has no number in brackets.
func Name(v string) string {
	if i := strings.LastIndexByte(v, '('); i > 0 && strings.HasSuffix(v, ")") {
		return v[:i]
	}
	return v
}

// IsOpenError reports the tool's "cannot open the device" (not root, or no
// such device).
func IsOpenError(err error) bool {
	var te *ToolError
	return errors.As(err, &te) && strings.Contains(te.Msg, ErrOpen)
}
