package membuf

import (
	"encoding/binary"
	"fmt"
)

// Pattern fills p with bytes derived from seed (xorshift64*): a different
// sequence for every seed, so data left over from an earlier iteration or
// another test cannot pass a check.
func Pattern(p []byte, seed uint64) {
	x := seed | 1
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		binary.LittleEndian.PutUint64(p[i:], x*0x2545F4914F6CDD1D)
	}
	for ; i < len(p); i++ {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		p[i] = byte((x * 0x2545F4914F6CDD1D) >> 56)
	}
}

// IterSeed derives a per-iteration seed from a session seed (splitmix64), so
// both hosts compute the same pattern without sending it.
func IterSeed(seed uint64, size, i int) uint64 {
	z := seed + uint64(size)<<32 + uint64(i)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Compare checks got against want (the whole of want) and explains the first
// difference. poison is the byte the receiver pre-filled its buffer with: a
// buffer still all poison means the data never arrived.
func Compare(got, want []byte, poison byte) error {
	return CompareCopy(got, want, poison, "the NIC completed the operation but the data never reached this memory; for GPU memory check nvidia-peermem or dma-buf support")
}

// CompareCopy is Compare for data some other engine moved (a GPU's copy
// engine): untouched says why a buffer still all poison matters there.
func CompareCopy(got, want []byte, poison byte, untouched string) error {
	if len(got) < len(want) {
		return fmt.Errorf("got %d bytes, want %d", len(got), len(want))
	}
	first, bad := -1, 0
	for i := range want {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad == 0 {
		return nil
	}
	all := true
	for _, b := range got[:len(want)] {
		if b != poison {
			all = false
			break
		}
	}
	cause := "the data arrived corrupted"
	if all {
		cause = "nothing arrived: the buffer still holds its pre-filled poison bytes (" + untouched + ")"
	}
	end := min(first+8, len(want))
	return fmt.Errorf("%d of %d bytes differ, first at offset %d (want % x, got % x): %s",
		bad, len(want), first, want[first:end], got[first:end], cause)
}

// GuardBefore checks that the off bytes before a transfer at offset off
// still hold poison (nothing written before the start).
func GuardBefore(got []byte, off int, poison byte) error {
	for i := 0; i < off && i < len(got); i++ {
		if got[i] != poison {
			return fmt.Errorf("byte %d before the transfer's start (offset %d) was overwritten (0x%02x, poison 0x%02x): the NIC wrote before the requested address", off-i, off, got[i], poison)
		}
	}
	return nil
}

// Guard checks that the 64 bytes after size still hold poison (no overlong write).
func Guard(got []byte, size int, poison byte) error {
	for i := size; i < len(got) && i < size+64; i++ {
		if got[i] != poison {
			return fmt.Errorf("byte %d past the %d-byte transfer was overwritten (0x%02x, poison 0x%02x): the NIC wrote beyond the requested length", i-size, size, got[i], poison)
		}
	}
	return nil
}
