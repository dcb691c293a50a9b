package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// TLS is asked for by the scheme (rediss://, rediss+sentinel://); the CA, the client
// certificate and the server name come from query parameters of the URL or from the
// flags of the same names, which set them for every TLS URL that does not set them
// itself. Without tls-ca the system's trust store is used. There is no way to turn the
// certificate check off.

// The TLS parameters, named as their flags.
const (
	paramCA         = "tls-ca"
	paramCert       = "tls-cert"
	paramKey        = "tls-key"
	paramServerName = "tls-server-name"
)

// tlsParams lists them in the order they are added to URLs.
var tlsParams = []string{paramCA, paramCert, paramKey, paramServerName}

// tlsFlags are the --tls-* flags that were given, by parameter name.
type tlsFlags map[string]string

func (tf tlsFlags) register(fs *pflag.FlagSet) {
	usage := map[string]string{
		paramCA:         "PEM `file` of the CAs that sign the servers' certificates",
		paramCert:       "PEM `file` of the client certificate",
		paramKey:        "PEM `file` of the client certificate's private key",
		paramServerName: "the `name` the servers' certificates must have",
	}
	for _, name := range tlsParams {
		fs.Var(tlsFlag{tf, name}, name, usage[name])
	}
}

// tlsFlag is one --tls-* flag.
type tlsFlag struct {
	tf   tlsFlags
	name string
}

func (f tlsFlag) String() string { return f.tf[f.name] }
func (f tlsFlag) Type() string   { return "string" }
func (f tlsFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty value")
	}
	f.tf[f.name] = s
	return nil
}

// applyTo returns urls with the flags added to the query of every TLS URL that does not
// give the parameter itself. Flags without a TLS URL to apply to are an error.
func (tf tlsFlags) applyTo(urls []string) ([]string, error) {
	out := make([]string, len(urls))
	used := false
	for i, raw := range urls {
		out[i] = raw
		if !isTLS(schemeOf(raw)) {
			continue
		}
		used = true
		q := queryOf(raw)
		var add [][2]string
		for _, name := range tlsParams {
			if v, ok := tf[name]; ok && !q.Has(name) {
				add = append(add, [2]string{name, v})
			}
		}
		out[i] = addQuery(raw, add)
	}
	if len(tf) > 0 && !used {
		return nil, fmt.Errorf("--%s is for TLS connections, and no server URL asks for TLS: use rediss:// (or %s://)", tf.names()[0], sentinelTLSScheme)
	}
	return out, nil
}

// names returns the names of the flags given, in tlsParams order.
func (tf tlsFlags) names() []string {
	var out []string
	for _, name := range tlsParams {
		if _, ok := tf[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// tlsConfig completes base, go-redis's TLS configuration for the URL (nil without TLS),
// with the URL's TLS parameters. Files that cannot be used are an error that names the
// parameter and the file, never their contents.
func (p *parsedURL) tlsConfig(base *tls.Config) (*tls.Config, error) {
	if base == nil {
		return nil, nil
	}
	c := base.Clone()
	if name := p.params[paramServerName]; name != "" {
		c.ServerName = name
	}
	if file := p.params[paramCA]; file != "" {
		pool, err := loadCAs(file)
		if err != nil {
			return nil, p.tlsError(paramCA, fmt.Sprintf("%s %q", paramCA, file), err)
		}
		c.RootCAs = pool
	}
	cert, key := p.params[paramCert], p.params[paramKey]
	switch {
	case cert == "" && key == "":
	case key == "":
		return nil, p.tlsError(paramKey, paramKey, fmt.Errorf("missing: the client certificate (%s) needs its private key", paramCert))
	case cert == "":
		return nil, p.tlsError(paramCert, paramCert, fmt.Errorf("missing: the private key (%s) needs its client certificate", paramKey))
	default:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, p.tlsError(paramCert, fmt.Sprintf("%s %q with %s %q", paramCert, cert, paramKey, key), err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// loadCAs reads a PEM file of CA certificates.
func loadCAs(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("no PEM certificate in it")
	}
	return pool, nil
}

// tlsError says that what (the parameters and files) cannot be used, and which flag or
// parameter gives it. err never holds a file's contents: Go's TLS and x509 errors do not.
func (p *parsedURL) tlsError(param, what string, err error) error {
	return fmt.Errorf("bad server URL %s: %s: %s (--%s, or %s= in the URL)", redactedURL(p.raw), what, strings.TrimPrefix(err.Error(), "tls: "), param, param)
}
