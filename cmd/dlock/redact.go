package main

import (
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Secrets never appear in dlock's output. Every server URL dlock sees (the --redis flags,
// DLOCK_REDIS, and anything on the command line that looks like a URL) gives its password
// to a redactor before anything is printed, and every line dlock writes passes through it:
// the password is replaced in every spelling an error may echo it in (as given,
// percent-decoded, percent-encoded, Go-quoted), and the userinfo of anything shaped like a
// URL, and the value of any sentinel-password parameter, are masked as well.

// placeholders replace a secret; the first that contains no secret is used, so that a
// replaced password cannot reappear inside its own replacement.
var placeholders = []string{"xxxxx", "*****", "#####", "<redacted>", "-----"}

// urlUserinfo matches the user:password@ part of anything shaped like a URL; the password
// runs to the last @ before white space or a quote, as net/url reads it.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:"]*:)[^\s"]*@`)

// querySecret matches a password given as a query parameter, up to the next parameter.
var querySecret = regexp.MustCompile(`((?:^|[?&\s])` + paramSentinelPassword + `=)[^&#\s"]+`)

// maskQuerySecrets masks the values of the password parameters in text.
func maskQuerySecrets(text string) string { return querySecret.ReplaceAllString(text, "${1}xxxxx") }

// maskUserinfo masks the password in a match of urlUserinfo. The placeholder of the
// documentation, "user:password@", is left alone: a real password "password" given to
// dlock is scrubbed anyway, as a recorded secret.
func maskUserinfo(m string) string {
	i := strings.IndexByte(m[strings.Index(m, "://")+3:], ':') + strings.Index(m, "://") + 3
	if m[i+1:] == "password@" {
		return m
	}
	return m[:i+1] + "xxxxx@"
}

// redactor scrubs secrets from text. It is safe for concurrent use; the zero value is ready.
type redactor struct {
	mu          sync.Mutex
	secrets     map[string]bool
	replacer    *strings.Replacer // nil until a secret is added
	placeholder string
}

// addURL records the password of rawURL, which need not be a valid URL: the password is
// what lies between the first ':' after "scheme://" (or after the start, with no scheme)
// and the last '@', which covers what net/url would take as the password and more.
func (r *redactor) addURL(rawURL string) {
	for _, s := range urlSecrets(rawURL) {
		r.addSecret(s)
	}
}

// urlSecrets returns the passwords of rawURL (the userinfo's, sentinel-password's) in
// every spelling they may be printed in.
func urlSecrets(rawURL string) []string {
	var raw []string
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			raw = append(raw, pw)
		}
	}
	if _, _, pw, ok, _ := splitURL(rawURL); ok {
		raw = append(raw, pw)
	}
	for _, m := range querySecret.FindAllStringSubmatchIndex(rawURL, -1) {
		raw = append(raw, rawURL[m[3]:m[1]])
	}
	var out []string
	for _, s := range raw {
		spellings := []string{s}
		if d, err := url.PathUnescape(s); err == nil {
			spellings = append(spellings, d)
		}
		if d, err := url.QueryUnescape(s); err == nil {
			spellings = append(spellings, d)
		}
		for _, d := range spellings {
			q := strconv.Quote(d)
			spellings = append(spellings, url.PathEscape(d), url.QueryEscape(d), q[1:len(q)-1])
		}
		out = append(out, spellings...)
	}
	return out
}

// addSecret records s; the empty string is ignored.
func (r *redactor) addSecret(s string) {
	if s == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets[s] {
		return
	}
	if r.secrets == nil {
		r.secrets = make(map[string]bool)
	}
	r.secrets[s] = true
	r.placeholder = ""
	for _, p := range placeholders {
		if !r.containsSecretLocked(p) {
			r.placeholder = p
			break
		}
	}
	pairs := make([]string, 0, 2*len(r.secrets))
	for s := range r.secrets {
		pairs = append(pairs, s, r.placeholder)
	}
	r.replacer = strings.NewReplacer(pairs...)
}

func (r *redactor) containsSecretLocked(text string) bool {
	for s := range r.secrets {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// String returns text without any recorded secret and with the userinfo of URLs masked.
func (r *redactor) String(text string) string {
	text = maskQuerySecrets(urlUserinfo.ReplaceAllStringFunc(text, maskUserinfo))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replacer == nil {
		return text
	}
	text = r.replacer.Replace(text)
	// A replacement next to other text can, in odd cases, spell a secret again: then
	// delete secrets until none is left (each pass makes the text shorter).
	for r.containsSecretLocked(text) {
		for s := range r.secrets {
			text = strings.ReplaceAll(text, s, "")
		}
	}
	return text
}

// Writer returns a writer that scrubs every Write before passing it to w. dlock writes
// whole lines or table cells, so a secret is never split across two writes.
func (r *redactor) Writer(w io.Writer) io.Writer { return &redactingWriter{r: r, w: w} }

type redactingWriter struct {
	r *redactor
	w io.Writer
}

func (rw *redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
