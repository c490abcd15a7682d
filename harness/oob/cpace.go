package oob

// CPace, the balanced PAKE of draft-irtf-cfrg-cpace (CFRG, draft 21), in its
// initiator-responder form with the cipher suite CPACE-RISTR255-SHA512
// (section 8.3). The group (ristretto255, RFC 9496: element derivation,
// strict decoding, constant-time scalar multiplication) comes from
// github.com/bwesterb/go-ristretto; this file only strings the draft's
// steps together. cpace_test.go checks them against the draft's test
// vectors (appendix B.3), so an implementation slip shows as a failed
// vector, not as a handshake that works between two copies of one bug.
//
// What it buys the handshake: both sides hash the token into the group
// generator, and each sends only y*g for a fresh random y. The key K=ya*yb*g
// agrees only when both used the same token; someone who ran the exchange
// with a guessed token learns whether that one guess was right (an online
// guess per connection) and nothing that tests a second guess offline.

import (
	"crypto/sha512"
	"errors"

	ristretto "github.com/bwesterb/go-ristretto"
)

// cpaceDSI is G_Ristretto255.DSI (draft section 8.3).
const cpaceDSI = "CPaceRistretto255"

// sha512Block is H.s_in_bytes for SHA-512 (draft section 6.2).
const sha512Block = 128

// cpaceShareLen is the length of a public share (an encoded element).
const cpaceShareLen = 32

// prependLen is the draft's prepend_len: a LEB128 length, then the data.
func prependLen(b []byte) []byte {
	n := len(b)
	out := make([]byte, 0, len(b)+3)
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			c |= 0x80
		}
		out = append(out, c)
		if n == 0 {
			break
		}
	}
	return append(out, b...)
}

// lvCat is the draft's lv_cat: each part with its length prepended.
func lvCat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, prependLen(p)...)
	}
	return out
}

// generatorString is the draft's generator_string (appendix A.2): the zero
// padding fills the hash's first block, so how long the token is does not
// show in the time the hash takes.
func generatorString(dsi, prs, ci, sid []byte, sIn int) []byte {
	zpad := max(0, sIn-1-len(prependLen(prs))-len(prependLen(dsi)))
	return lvCat(dsi, prs, make([]byte, zpad), ci, sid)
}

// cpaceGenerator is calculate_generator for ristretto255 with SHA-512:
// element_derivation(SHA-512(generator_string)). go-ristretto's
// DeriveDalek is exactly that (SHA-512, then RFC 9496's one-way map of the
// 64 bytes); the draft's vectors pin it.
func cpaceGenerator(prs, ci, sid []byte) *ristretto.Point {
	var g ristretto.Point
	return g.DeriveDalek(generatorString([]byte(cpaceDSI), prs, ci, sid, sha512Block))
}

// cpaceParty is one side's secret scalar and public share.
type cpaceParty struct {
	y     ristretto.Scalar
	share []byte
}

// newCPace samples y (uniform in 1..order-1, the draft's alternative to
// masked bytes, section 8.3) and computes the share y*g.
func newCPace(prs, ci, sid []byte) *cpaceParty {
	p := &cpaceParty{}
	var zero ristretto.Scalar
	zero.SetZero()
	for {
		p.y.Rand()
		if !p.y.Equals(&zero) {
			break
		}
	}
	return p.withScalar(prs, ci, sid)
}

// withScalar computes the share for a given y (the draft's vectors fix y).
func (p *cpaceParty) withScalar(prs, ci, sid []byte) *cpaceParty {
	var Y ristretto.Point
	Y.ScalarMult(cpaceGenerator(prs, ci, sid), &p.y)
	p.share = Y.Bytes()
	return p
}

var errCPacePeer = errors.New("key share is not a valid ristretto255 element, or is the identity")

// scalarMultVfy is G.scalar_mult_vfy: y times the decoded peer share, or an
// error where the draft returns G.I (a share that does not decode, or
// whose product is the identity): the handshake must then abort.
func (p *cpaceParty) scalarMultVfy(peer []byte) ([]byte, error) {
	if len(peer) != cpaceShareLen {
		return nil, errCPacePeer
	}
	var X, K, id ristretto.Point
	var buf [32]byte
	copy(buf[:], peer)
	if !X.SetBytes(&buf) {
		return nil, errCPacePeer
	}
	K.ScalarMult(&X, &p.y)
	id.SetZero()
	if K.Equals(&id) {
		return nil, errCPacePeer
	}
	return K.Bytes(), nil
}

// transcriptIR is the draft's transcript_ir: the initiator's share and
// associated data, then the responder's.
func transcriptIR(ya, ada, yb, adb []byte) []byte {
	return append(lvCat(ya, ada), lvCat(yb, adb)...)
}

// cpaceISK is the intermediate session key:
// SHA-512(lv_cat(DSI || "_ISK", sid, K) || transcript_ir(Ya, ADa, Yb, ADb)).
func cpaceISK(sid, k, transcript []byte) []byte {
	h := sha512.New()
	h.Write(lvCat([]byte(cpaceDSI+"_ISK"), sid, k))
	h.Write(transcript)
	return h.Sum(nil)
}

// isk finishes the exchange for this side: initiator says which share was
// the initiator's (the client's, in the handshake).
func (p *cpaceParty) isk(sid, peer []byte, initiator bool, ada, adb []byte) ([]byte, error) {
	k, err := p.scalarMultVfy(peer)
	if err != nil {
		return nil, err
	}
	ya, yb := p.share, peer
	if !initiator {
		ya, yb = peer, p.share
	}
	return cpaceISK(sid, k, transcriptIR(ya, ada, yb, adb)), nil
}
