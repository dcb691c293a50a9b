package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, with the certificates it
// issued, as PEM files in a t.TempDir. Each CA is unrelated to every other:
// a client that trusts one rejects the certificates of another.
type CA struct {
	// CertFile is the CA's certificate: what a client (--tls-ca) or a
	// server (--tls-ca-cert-file) that trusts the CA is given.
	CertFile string
	// Server is a certificate for 127.0.0.1 and localhost, valid from an
	// hour ago for a day; Client is a client certificate valid as long.
	Server, Client KeyPair

	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	client tls.Certificate
}

// KeyPair names the PEM files of a certificate and of its private key.
type KeyPair struct {
	CertFile, KeyFile string
}

// serials numbers the certificates of this process, so that no two share a
// serial number (clients may cache by it).
var serials atomic.Int64

// NewCA makes a CA and issues its Server and Client certificates. It fails
// the test if that fails (it does not on a working machine).
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: "redistest CA " + strconv.FormatInt(serials.Load(), 10)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("redistest: making a CA: %v", err)
	}
	cert, _ := x509.ParseCertificate(der) // just made: it parses
	ca := &CA{cert: cert, key: key, dir: tb.TempDir()}
	ca.CertFile = ca.write(tb, "ca.pem", "CERTIFICATE", der)
	ca.Server = ca.Issue(tb, now.Add(24*time.Hour))
	ca.Client = ca.Issue(tb, now.Add(24*time.Hour))
	ca.client, err = tls.LoadX509KeyPair(ca.Client.CertFile, ca.Client.KeyFile)
	if err != nil {
		tb.Fatalf("redistest: loading the client certificate: %v", err)
	}
	return ca
}

// Issue writes a new certificate signed by ca, for 127.0.0.1 and localhost,
// usable by servers and clients, valid from a day before notAfter until
// notAfter: pass a time in the past for an expired certificate.
func (ca *CA) Issue(tb testing.TB, notAfter time.Time) KeyPair {
	tb.Helper()
	key := newKey(tb)
	n := serials.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    notAfter.Add(-24 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("redistest: issuing a certificate: %v", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("redistest: encoding a key: %v", err)
	}
	name := "cert-" + strconv.FormatInt(n, 10)
	return KeyPair{
		CertFile: ca.write(tb, name+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(tb, name+".key", "PRIVATE KEY", pkcs8),
	}
}

// ClientTLS returns a new client configuration that trusts only ca and
// presents its Client certificate.
func (ca *CA) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{ca.client}, MinVersion: tls.VersionTLS12}
}

// WithTLS makes a server speak TLS only (--port 0, --tls-port: Port and Addr
// are the TLS port) with the certificate cert, trusting client certificates
// signed by ca; authClients is --tls-auth-clients: "yes" (clients must
// present one), "optional" or "no". Options and Client connect with
// ca.ClientTLS(). With StartSentinel, the Sentinels, the replica and the
// master all speak TLS, with each other too. Not for StartCluster.
func WithTLS(ca *CA, cert KeyPair, authClients string) Option {
	return func(c *config) {
		c.tls = &tlsSetup{
			client: ca.ClientTLS(),
			args: []string{
				"--tls-cert-file", cert.CertFile,
				"--tls-key-file", cert.KeyFile,
				"--tls-ca-cert-file", ca.CertFile,
				"--tls-auth-clients", authClients,
			},
		}
	}
}

// tlsSetup is what WithTLS sets: the server's TLS arguments, and how clients
// connect. A nil *tlsSetup is a plain server.
type tlsSetup struct {
	args   []string
	client *tls.Config
}

// clientConfig returns a new configuration for clients, or nil.
func (t *tlsSetup) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.client.Clone()
}

// probeConfig is how the readiness check connects: as clients do, but
// without checking the server's certificate, which a test may have made
// invalid on purpose (INFO process_id identifies the server instead).
func (t *tlsSetup) probeConfig() *tls.Config {
	c := t.clientConfig()
	if c != nil {
		c.InsecureSkipVerify = true
	}
	return c
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("redistest: generating a key: %v", err)
	}
	return key
}

// write writes one PEM block to name in ca's directory, readable by its
// owner only (it may be a private key), and returns the file's path.
func (ca *CA) write(tb testing.TB, name, blockType string, der []byte) string {
	tb.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return path
}
