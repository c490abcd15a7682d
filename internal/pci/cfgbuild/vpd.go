package cfgbuild

// VPD builds a Vital Product Data image the way a card's EEPROM holds one:
// the identifier string, the read-only keywords closed by RV with the
// checksum that makes the sum of every byte through it zero, a read-write
// section, the end tag, and the 0xff padding the kernel passes on. It is the
// inverse of pci.ParseVPD; corrupt flips a data byte of the first keyword
// after the checksum was computed.
func VPD(name string, keywords [][2]string, corrupt bool) []byte {
	b := []byte{0x82, byte(len(name)), byte(len(name) >> 8)}
	b = append(b, name...)
	var r []byte
	for _, kv := range keywords {
		r = append(r, kv[0][0], kv[0][1], byte(len(kv[1])))
		r = append(r, kv[1]...)
	}
	r = append(r, 'R', 'V', 1, 0)
	hdr := len(b)
	b = append(b, 0x90, byte(len(r)), byte(len(r)>>8))
	b = append(b, r...)
	var sum byte
	for _, c := range b[:len(b)-1] {
		sum += c
	}
	b[len(b)-1] = -sum
	if corrupt && len(keywords) > 0 && len(keywords[0][1]) > 0 {
		b[hdr+6]++
	}
	b = append(b, 0x91, 4, 0, 'V', '1', 1, ' ', 0x78)
	return append(b, 0xff, 0xff, 0xff, 0xff)
}
