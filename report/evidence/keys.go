package evidence

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// KeyEnv names the operator's signing key: a PEM file, PKCS#8 Ed25519 or
// ECDSA P-256 (what `openssl genpkey -algorithm ed25519` or `gdrreport
// keygen` writes).
const KeyEnv = "GDR_SIGN_KEY"

// key signs and verifies DSSE's pre-authentication encoding with one key.
type key struct {
	priv crypto.Signer // nil for a verifier
	pub  crypto.PublicKey
	id   string
}

var _ dsse.SignerVerifier = (*key)(nil)

func (k *key) KeyID() (string, error)   { return k.id, nil }
func (k *key) Public() crypto.PublicKey { return k.pub }

func (k *key) Sign(_ context.Context, data []byte) ([]byte, error) {
	if k.priv == nil {
		return nil, errors.New("a public key cannot sign")
	}
	switch k.pub.(type) {
	case ed25519.PublicKey:
		return k.priv.Sign(rand.Reader, data, crypto.Hash(0))
	default:
		sum := sha256.Sum256(data)
		return k.priv.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
}

func (k *key) Verify(_ context.Context, data, sig []byte) error {
	switch p := k.pub.(type) {
	case ed25519.PublicKey:
		if !ed25519.Verify(p, data, sig) {
			return errors.New("ed25519 signature does not match")
		}
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(data)
		if !ecdsa.VerifyASN1(p, sum[:], sig) {
			return errors.New("ECDSA signature does not match")
		}
	default:
		return fmt.Errorf("unsupported public key %T", k.pub)
	}
	return nil
}

func newKey(priv crypto.Signer, pub crypto.PublicKey) (*key, error) {
	switch p := pub.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s: use P-256", p.Curve.Params().Name)
		}
	default:
		return nil, fmt.Errorf("key type %T: use Ed25519 or ECDSA P-256", pub)
	}
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &key{priv: priv, pub: pub, id: id}, nil
}

// LoadSigner reads a PEM private key (PKCS#8; "EC PRIVATE KEY" too).
func LoadSigner(path string) (dsse.SignerVerifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", KeyEnv, path, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s=%s: no PEM block", KeyEnv, path)
	}
	var priv any
	switch blk.Type {
	case "PRIVATE KEY":
		priv, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		priv, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("%s=%s: PEM block %q is not a private key (want PRIVATE KEY, PKCS#8)", KeyEnv, path, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", KeyEnv, path, err)
	}
	s, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s=%s: %T cannot sign", KeyEnv, path, priv)
	}
	k, err := newKey(s, s.Public())
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", KeyEnv, path, err)
	}
	return k, nil
}

// LoadPublicKey reads a PEM public key (PKIX "PUBLIC KEY").
func LoadPublicKey(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: no PEM PUBLIC KEY block", path)
	}
	return x509.ParsePKIXPublicKey(blk.Bytes)
}

// NewVerifier verifies with pub.
func NewVerifier(pub crypto.PublicKey) (dsse.Verifier, error) { return newKey(nil, pub) }

// GenerateKey writes a new Ed25519 key pair as PEM: priv (PKCS#8, mode
// 0600) and pub (PKIX). Neither file may exist: a key is never overwritten
// (an existing file keeps its mode, a link would be followed), so each is
// created with O_EXCL, which also refuses a symbolic link in its place.
func GenerateKey(priv, pub string) error {
	for _, p := range []string{priv, pub} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: a key is never overwritten; remove it or choose another name", p)
		}
	}
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		return err
	}
	pder, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		return err
	}
	if err := createNew(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	if err := createNew(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o644); err != nil {
		os.Remove(priv) // no half pair
		return err
	}
	return nil
}

// createNew writes b to a file that must not exist yet, with exactly mode
// (not the umask's: the private key must be 0600 whatever the shell's is).
func createNew(p string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	return f.Close()
}
