package main

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Server URLs are go-redis's (redis://, rediss://, unix://) plus Sentinel's
// (redis+sentinel://, rediss+sentinel://), and dlock reads a few query parameters itself:
// the TLS files and server name (tls.go) and the Sentinels' credentials (sentinel.go).
// Every other parameter goes to go-redis.

// urlForm is the shape every URL error message shows.
const urlForm = "redis://[user:password@]host[:port][/db] (rediss:// for TLS), or " + sentinelForm

// parsedURL is one server URL taken apart: what go-redis parses, and dlock's own
// parameters. It holds credentials: print only redactedURL(raw).
type parsedURL struct {
	raw    string            // as given, for messages
	scheme string            // lower case
	u      *url.URL          // without dlock's parameters; a Sentinel URL's host is its first Sentinel
	hosts  []string          // a Sentinel URL's Sentinels, host:port each; else nil
	params map[string]string // dlock's own query parameters, by name
}

// splitServerURL checks raw's scheme against allowed and takes it apart. Its errors never
// quote raw unmasked, but they may quote parts of it: the caller scrubs them.
func splitServerURL(raw string, allowed ...string) (*parsedURL, error) {
	scheme, err := checkScheme(raw, allowed...)
	if err != nil {
		return nil, err
	}
	p := &parsedURL{raw: raw, scheme: scheme, params: map[string]string{}}
	toParse := raw
	if p.sentinel() {
		if toParse, p.hosts, err = cutHosts(raw); err != nil {
			return nil, err
		}
	}
	if p.u, err = url.Parse(toParse); err != nil {
		return nil, badURL(raw, err)
	}
	return p, p.takeParams()
}

// tls reports whether the URL asks for TLS.
func (p *parsedURL) tls() bool { return isTLS(p.scheme) }

// sentinel reports whether the URL names a master through its Sentinels.
func (p *parsedURL) sentinel() bool { return isSentinel(p.scheme) }

// schemeOf returns raw's scheme in lower case, or "" if it has none.
func schemeOf(raw string) string {
	scheme, _, _, _, _ := splitURL(raw)
	return strings.ToLower(strings.TrimSuffix(scheme, "://"))
}

func isTLS(scheme string) bool      { return scheme == "rediss" || scheme == sentinelTLSScheme }
func isSentinel(scheme string) bool { return scheme == sentinelScheme || scheme == sentinelTLSScheme }

// ownParam reports whether dlock reads the query parameter name itself.
func ownParam(name string) bool {
	return slices.Contains(tlsParams, name) || slices.Contains(sentinelParams, name)
}

// takeParams moves dlock's own parameters from the URL's query to params, and refuses
// those that do not fit the scheme.
func (p *parsedURL) takeParams() error {
	q, err := url.ParseQuery(p.u.RawQuery)
	if err != nil {
		return badURL(p.raw, err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if err := p.checkParam(name, q[name]); err != nil {
			return fmt.Errorf("bad server URL %s: %w", redactedURL(p.raw), err)
		}
		if ownParam(name) {
			p.params[name] = q.Get(name)
			delete(q, name)
		}
	}
	p.u.RawQuery = q.Encode()
	return nil
}

// checkParam says what is wrong with the query parameter name given values, if anything.
func (p *parsedURL) checkParam(name string, values []string) error {
	own := ownParam(name)
	switch {
	case name == "skip_verify":
		return errors.New("dlock does not turn off the server's certificate check: give the CA that signed it with --tls-ca (or tls-ca= in the URL)")
	case slices.Contains(tlsParams, name) && !p.tls():
		return fmt.Errorf("%s is for TLS connections: use rediss:// (or %s://)", name, sentinelTLSScheme)
	case slices.Contains(sentinelParams, name) && !p.sentinel():
		return fmt.Errorf("%s is for Sentinel URLs: %s", name, sentinelForm)
	case own && len(values) > 1:
		return fmt.Errorf("%s is given %d times; give it once", name, len(values))
	case own && values[0] == "":
		return fmt.Errorf("%s is empty; give a value or leave it out", name)
	}
	return nil
}

// checkScheme returns raw's scheme in lower case if it is one of allowed.
func checkScheme(raw string, allowed ...string) (string, error) {
	scheme := schemeOf(raw)
	if scheme == "" {
		return "", fmt.Errorf("bad server URL %s: no scheme; want %s", redactedURL(raw), urlForm)
	}
	if !slices.Contains(allowed, scheme) {
		return "", fmt.Errorf("bad server URL %s: scheme %q is not one of %s; want %s", redactedURL(raw), scheme, strings.Join(allowed, ", "), urlForm)
	}
	return scheme, nil
}

// badURL explains a URL that go-redis or net/url refused. Their messages quote parts of
// the URL, which may be parts of a password that could not be told apart from the rest
// (a '/' or '?' in an unencoded password): only the kind of problem is kept.
func badURL(raw string, err error) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	msg = strings.TrimPrefix(strings.TrimPrefix(msg, "redis: "), "net/url: ")
	msg = quoted.ReplaceAllString(msg, "")
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.Join(strings.Fields(msg), " ")
	hint := ""
	switch {
	case strings.Contains(msg, "escape"), strings.Contains(msg, "userinfo"):
		hint = " (percent-encode special characters in the user and password: @ as %40, / as %2F, % as %25, : in the user as %3A)"
	case strings.Contains(msg, "option"):
		hint = " (see the query options of go-redis ParseURL)"
	}
	return fmt.Errorf("bad server URL %s: %s%s; want %s", redactedURL(raw), msg, hint, urlForm)
}

// quoted matches a Go-quoted string in an error message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// validScheme matches a URL scheme as RFC 3986 defines it.
var validScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*$`)

// splitURL cuts raw into "scheme://" (empty unless the scheme is valid), the user, the
// password and what follows the last '@'. The password is what lies between the first ':'
// of the userinfo and the last '@': what net/url takes as the password, and more when the
// URL is malformed, so that a password is never shown even in part.
func splitURL(raw string) (scheme, user, password string, hasPassword bool, rest string) {
	rest = raw
	if s, r, ok := strings.Cut(raw, "://"); ok && validScheme.MatchString(s) {
		scheme, rest = s+"://", r
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return scheme, "", "", false, rest
	}
	user, password, hasPassword = strings.Cut(rest[:at], ":")
	return scheme, user, password, hasPassword, rest[at+1:]
}

// redactedURL shows raw quoted, with its passwords masked.
func redactedURL(raw string) string {
	scheme, user, _, hasPassword, rest := splitURL(raw)
	rest = maskQuerySecrets(rest)
	switch {
	case hasPassword:
		return strconv.Quote(scheme + user + ":xxxxx@" + rest)
	case strings.Contains(raw, "@"):
		return strconv.Quote(scheme + user + "@" + rest)
	}
	return strconv.Quote(scheme + rest)
}

// addQuery returns raw with params (name, value) added to its query. A '/' in a value is
// left as it is, so that file names stay readable in messages.
func addQuery(raw string, params [][2]string) string {
	if len(params) == 0 {
		return raw
	}
	start, end := afterUserinfo(raw, "#")
	sep := "?"
	if strings.Contains(raw[start:end], "?") {
		sep = "&"
	}
	var b strings.Builder
	for _, kv := range params {
		b.WriteString(sep + kv[0] + "=" + strings.ReplaceAll(url.QueryEscape(kv[1]), "%2F", "/"))
		sep = "&"
	}
	return raw[:end] + b.String() + raw[end:]
}

// afterUserinfo returns where raw's host begins (after the scheme and userinfo, as
// splitURL cuts them), and where the first byte of stops after it is, or len(raw).
func afterUserinfo(raw, stops string) (start, end int) {
	_, _, _, _, rest := splitURL(raw)
	start = len(raw) - len(rest)
	if i := strings.IndexAny(rest, stops); i >= 0 {
		return start, start + i
	}
	return start, len(raw)
}

// queryOf returns the parameters of raw's query, or none if it cannot be parsed (the
// parser then reports it).
func queryOf(raw string) url.Values {
	start, end := afterUserinfo(raw, "#")
	_, query, _ := strings.Cut(raw[start:end], "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return url.Values{}
	}
	return q
}
