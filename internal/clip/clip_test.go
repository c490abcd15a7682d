package clip

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"0x10de"`, Quote("0x10de"))
	assert.Equal(t, `"\x00\xff\n"`, Quote("\x00\xff\n"))
	long := strings.Repeat("a", 100<<20)
	q := Quote(long)
	assert.Equal(t, `"`+strings.Repeat("a", Max)+`"... (104857600 bytes)`, q)
	assert.Equal(t, q, Bytes([]byte(long)))
	assert.Equal(t, `"ab"`, Bytes([]byte("ab")))
	// A cut never splits a UTF-8 sequence.
	s := strings.Repeat("a", Max-1) + "é" + "zzz"
	p, cut := Prefix(s)
	assert.True(t, cut)
	assert.Equal(t, strings.Repeat("a", Max-1), p)
	assert.Equal(t, Quote(s), Bytes([]byte(s)))
}

func TestLastLines(t *testing.T) {
	assert.Equal(t, "c | d", LastLines("a\nb\nc\nd\n", 2))
	assert.Equal(t, "only", LastLines("only\n", 3))
	assert.Equal(t, "", LastLines("", 3))
}
