package oob

import (
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unhex reads a vector as the draft prints it: hex in lines.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// The string helpers against the draft's vectors (appendix A.1).
func TestCPaceStrings(t *testing.T) {
	assert.Equal(t, "00", hex.EncodeToString(prependLen(nil)))
	assert.Equal(t, "0431323334", hex.EncodeToString(prependLen([]byte("1234"))))
	r := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	assert.Equal(t, []byte{0x7f}, prependLen(r(127))[:1])
	assert.Equal(t, []byte{0x80, 0x01}, prependLen(r(128))[:2])
	assert.Len(t, prependLen(r(128)), 130)
	assert.Equal(t, "043132333401350003363738", hex.EncodeToString(lvCat([]byte("1234"), []byte("5"), nil, []byte("678"))))
}

// CPACE-RISTR255-SHA512 against the draft's vectors (appendix B.3): the
// generator, both shares, K, the initiator-responder ISK, and the two
// invalid shares every implementation must refuse.
func TestCPaceVectors(t *testing.T) {
	prs := []byte("Password")
	ci := unhex(t, "0b415f696e69746961746f720b425f726573706f6e646572")
	sid := unhex(t, "7e4b4791d6a8ef019b936c79fb7f2c57")

	gs := generatorString([]byte(cpaceDSI), prs, ci, sid, sha512Block)
	assert.Equal(t, unhex(t, `11435061636552697374726574746f3235350850617373776f726464
      00000000000000000000000000000000000000000000000000000000
      00000000000000000000000000000000000000000000000000000000
      00000000000000000000000000000000000000000000000000000000
      00000000000000000000000000000000180b415f696e69746961746f
      720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f
      2c57`), gs)
	h := sha512.Sum512(gs)
	assert.Equal(t, unhex(t, `da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288
      b6663af06bf645c93cd1c51512307199c80e84908916d983b34af772
      05f90851a657ee27`), h[:])
	assert.Equal(t, unhex(t, "222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56"), cpaceGenerator(prs, ci, sid).Bytes())

	scalar := func(s string) *cpaceParty {
		p := &cpaceParty{}
		var b [32]byte
		copy(b[:], unhex(t, s))
		p.y.SetBytes(&b)
		return p.withScalar(prs, ci, sid)
	}
	a := scalar("da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08")
	b := scalar("d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d")
	assert.Equal(t, unhex(t, "d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157"), a.share)
	assert.Equal(t, unhex(t, "3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258"), b.share)

	k := unhex(t, "80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f")
	ka, err := a.scalarMultVfy(b.share)
	require.NoError(t, err)
	kb, err := b.scalarMultVfy(a.share)
	require.NoError(t, err)
	assert.Equal(t, k, ka)
	assert.Equal(t, k, kb)

	isk := unhex(t, `b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dc
      ae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c
      3fa2068af7900447`)
	iskA, err := a.isk(sid, b.share, true, []byte("ADa"), []byte("ADb"))
	require.NoError(t, err)
	iskB, err := b.isk(sid, a.share, false, []byte("ADa"), []byte("ADb"))
	require.NoError(t, err)
	assert.Equal(t, isk, iskA)
	assert.Equal(t, isk, iskB)

	// B.3.10: scalar_mult_vfy with a valid input.
	s := &cpaceParty{}
	var sb [32]byte
	copy(sb[:], unhex(t, "7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05"))
	s.y.SetBytes(&sb)
	got, err := s.scalarMultVfy(unhex(t, "2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c"))
	require.NoError(t, err)
	assert.Equal(t, unhex(t, "7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e"), got)
	// B.3.11: a share that does not decode, and the identity, abort.
	for _, bad := range []string{
		"2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c",
		"0000000000000000000000000000000000000000000000000000000000000000",
	} {
		_, err := s.scalarMultVfy(unhex(t, bad))
		assert.ErrorIs(t, err, errCPacePeer, bad)
	}
	_, err = s.scalarMultVfy(make([]byte, 31))
	assert.ErrorIs(t, err, errCPacePeer)
}

// Fresh exchanges agree on the key with the same token and not with
// different ones; an empty token (GDR_TOKEN unset) still keys the session.
func TestCPaceAgreement(t *testing.T) {
	sid := newNonce()
	for _, c := range []struct {
		a, b string
		same bool
	}{{"summer2026", "summer2026", true}, {"summer2026", "summer2025", false}, {"", "", true}, {"", "x", false}} {
		a := newCPace([]byte(c.a), []byte("ci"), sid)
		b := newCPace([]byte(c.b), []byte("ci"), sid)
		ka, err := a.isk(sid, b.share, true, nil, nil)
		require.NoError(t, err)
		kb, err := b.isk(sid, a.share, false, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, c.same, string(ka) == string(kb), "%q vs %q", c.a, c.b)
	}
}
