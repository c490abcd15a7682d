// Package dmi reads the host's DMI (SMBIOS) identity from /sys/class/dmi/id:
// vendor, product, serial numbers, board and BIOS. It is the one reader of
// that directory.
//
// The serial numbers and the product UUID are mode 0400 (root only; the
// kernel's dmi-id.c marks them so): a run as another user gets them listed
// in Unreadable instead of values, so the report can say why they are
// missing. Board vendors fill unset fields with placeholders ("To Be Filled
// By O.E.M.", "Default string", "Not Specified"); those are not values and
// are left out (dmidecode prints the same strings, and nobody can order a
// part by them).
package dmi

import (
	"errors"
	"io/fs"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Dir is where the kernel publishes the DMI identity.
const Dir = "/sys/class/dmi/id"

// Info is the host's DMI identity. An empty field was absent, unreadable or
// a placeholder.
type Info struct {
	SysVendor     string `json:"sys_vendor,omitempty"`
	Product       string `json:"product,omitempty"`
	ProductSKU    string `json:"product_sku,omitempty"`
	ProductSerial string `json:"product_serial,omitempty"`
	ProductUUID   string `json:"product_uuid,omitempty"`
	BoardVendor   string `json:"board_vendor,omitempty"`
	BoardName     string `json:"board_name,omitempty"`
	BoardSerial   string `json:"board_serial,omitempty"`
	ChassisSerial string `json:"chassis_serial,omitempty"`
	BIOSVendor    string `json:"bios_vendor,omitempty"`
	BIOSVersion   string `json:"bios_version,omitempty"`
	BIOSDate      string `json:"bios_date,omitempty"`
	// Unreadable names the files that exist but could not be read (not
	// root), so "absent" and "hidden" stay apart.
	Unreadable []string `json:"unreadable,omitempty"`
}

// Empty reports that nothing was read (no DMI: many ARM hosts, containers
// without /sys/class/dmi).
func (i Info) Empty() bool {
	return len(i.Unreadable) == 0 && i.fields() == [12]string{}
}

func (i Info) fields() [12]string {
	return [12]string{i.SysVendor, i.Product, i.ProductSKU, i.ProductSerial, i.ProductUUID, i.BoardVendor,
		i.BoardName, i.BoardSerial, i.ChassisSerial, i.BIOSVendor, i.BIOSVersion, i.BIOSDate}
}

// Read reads the DMI identity through root. A missing directory gives an
// empty Info and no error; only a read error other than "absent" or
// "permission denied" is returned (with what was read so far).
func Read(root *hostfs.Root) (Info, error) {
	var i Info
	files := []struct {
		name string
		dst  *string
	}{
		{"sys_vendor", &i.SysVendor}, {"product_name", &i.Product}, {"product_sku", &i.ProductSKU},
		{"product_serial", &i.ProductSerial}, {"product_uuid", &i.ProductUUID},
		{"board_vendor", &i.BoardVendor}, {"board_name", &i.BoardName}, {"board_serial", &i.BoardSerial},
		{"chassis_serial", &i.ChassisSerial}, {"bios_vendor", &i.BIOSVendor},
		{"bios_version", &i.BIOSVersion}, {"bios_date", &i.BIOSDate},
	}
	var errs []error
	for _, f := range files {
		s, err := root.ReadString(Dir + "/" + f.name)
		switch {
		case err == nil:
			*f.dst = Value(s)
		case errors.Is(err, fs.ErrPermission):
			i.Unreadable = append(i.Unreadable, f.name)
		case errors.Is(err, fs.ErrNotExist):
		default:
			errs = append(errs, err)
		}
	}
	sort.Strings(i.Unreadable)
	return i, errors.Join(errs...)
}

// placeholders are the strings firmware writes into fields nobody set
// (dmidecode's own "Not Specified" among them), compared case-insensitively.
var placeholders = map[string]bool{
	"to be filled by o.e.m.": true, "default string": true, "not specified": true,
	"not applicable": true, "none": true, "n/a": true, "na": true, "unknown": true,
	"system serial number": true, "system product name": true, "system manufacturer": true,
	"base board serial number": true, "chassis serial number": true, "o.e.m.": true,
	"0123456789": true, "123456789": true, "0": true, "00000000": true,
	"03000200-0400-0500-0006-000700080009": true, // a common unset product_uuid
	"00000000-0000-0000-0000-000000000000": true, "ffffffff-ffff-ffff-ffff-ffffffffffff": true,
}

// Value is s trimmed, or "" when s is a placeholder.
func Value(s string) string {
	s = strings.TrimSpace(s)
	if placeholders[strings.ToLower(s)] || strings.Trim(s, "0") == "" || strings.Trim(s, " .-_") == "" {
		return ""
	}
	return s
}
