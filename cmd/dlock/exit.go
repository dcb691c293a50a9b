package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Exit codes. They are part of the command's contract, listed in 'dlock help'.
const (
	exitOK          = 0
	exitFailure     = 1  // anything not covered below
	exitUsage       = 2  // bad command line, bad URL, invalid name, flags that cannot work together
	exitUnavailable = 69 // EX_UNAVAILABLE: Redis unreachable, refused the credentials or a command
	exitLost        = 70 // EX_SOFTWARE: run: the lock was lost while the command ran
	exitNotAcquired = 75 // EX_TEMPFAIL: run: the lock was not acquired in time
	exitCannotExec  = 126
	exitNotFound    = 127
	exitSignalBase  = 128 // run: the command (or dlock, while waiting) died from signal N: 128+N
)

// exitError ends the command with code, after msg (if any) is printed on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// fail returns an error that ends dlock with code and says msg.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// exitWith ends dlock with code and prints nothing: the code is the message (a child's).
func exitWith(code int) error { return &exitError{code: code} }

// usage is a bad command line: exit 2, with a pointer to the command's help.
func usage(cmd, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &exitError{code: exitUsage, msg: fmt.Sprintf("%s\nRun 'dlock help %s' for its flags.", msg, cmd)}
}

// cli is one run of dlock: where it reads and writes, and what it must not print.
type cli struct {
	// Given to child processes as they are, so that they can use the terminal.
	stdin, stdoutFile, stderrFile *os.File
	// dlock's own output: every write is scrubbed of secrets.
	stdout, stderr io.Writer
	red            *redactor
	getenv         func(string) string
}

// report prints what err says, scrubbed, and returns the exit code.
func (c *cli) report(cmd string, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(c.stderr, "dlock %s: %s\n", cmd, c.red.String(msg))
	}
	return code
}

// unavailable reports whether err means that Redis could not be used at all: unreachable,
// too slow, refusing the credentials or a command, or not serving (loading, cluster down).
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	p := diagnose(oneLine(err.Error()))
	return p != nil && p.unavailable
}

// redisFailure wraps an error from a Redis request made by dlock itself: exit 69 when Redis
// could not be used, 1 otherwise, with what to do.
func redisFailure(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fail(exitFailure, "%s: interrupted", what)
	}
	code := exitFailure
	if unavailable(err) {
		code = exitUnavailable
	}
	return fail(code, "%s: %s", what, explainRedis(err))
}

// explainRedis returns the error's message on one line, with what to do when its cause
// is known. An error of the library already says what to do, in the words of the Go API:
// that advice is put in the CLI's words instead of being given twice.
func explainRedis(err error) string {
	msg := oneLine(err.Error())
	hint := ""
	if p := diagnose(msg); p != nil {
		hint = p.advice()
	} else if errors.Is(err, context.DeadlineExceeded) {
		hint = timeoutHint
	}
	if hint == "" {
		return msg
	}
	if api := engine.Diagnose(msg).Advice(engine.APITerms); api != "" && strings.Contains(msg, api) {
		return strings.ReplaceAll(msg, api, hint)
	}
	return msg + " (" + hint + ")"
}

// go-redis's error when no Sentinel gave the master's address (the Sentinels' errors
// follow, one per line), and what dlock says instead: not all of them were unreachable.
const (
	sentinelsFailed = "redis: all sentinels specified in configuration are unreachable: "
	noSentinel      = "no Sentinel gave the master's address: "
)

// oneLine puts a multi-line error (errors.Join, as go-redis gives the Sentinels' errors)
// on one line, each distinct line once.
func oneLine(msg string) string {
	head, rest, ok := strings.Cut(msg, sentinelsFailed)
	if ok {
		head += noSentinel
	} else {
		head, rest = "", msg
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return head + strings.Join(lines, "; ")
}

// problem is a known cause of a Redis error, told by the error's text: the causes the
// library knows (engine.Diagnose) with the exit code they get, and those of connecting.
type problem struct {
	cause       engine.Diagnosis // the library tells this cause in the error's text; or
	signs       []string         // the error's text contains one of them; nil (and no cause): any text
	sentinel    bool             // and it is the Sentinels' error
	unavailable bool             // Redis cannot be used: exit 69
	hint        string           // what to do; "": the library's advice for cause, if any
}

// advice is what to do about p, in the CLI's words.
func (p *problem) advice() string {
	if p.hint == "" {
		return p.cause.Advice(cliTerms)
	}
	return p.hint
}

// cliTerms are the CLI's words for what the library's advice points to.
var cliTerms = engine.Terms{
	Credentials: "the --redis URL, DLOCK_REDIS or REDIS_URL",
	Prefix:      "--prefix",
	Permissions: "check its ACL",
}

const timeoutHint = "the server did not answer in time: is the address right and the server up?"

// problems are the known causes, the most specific first: diagnose takes the first that
// matches.
var problems = []problem{
	{signs: []string{"certificate signed by unknown authority"}, unavailable: true,
		hint: "the server's certificate is not signed by a CA dlock trusts: give the CA's certificate with --tls-ca (or tls-ca= in the URL)"},
	{signs: []string{"certificate has expired or is not yet valid"}, unavailable: true,
		hint: "the server's certificate has expired, or is not valid yet: renew it on the server, or check this machine's clock"},
	{signs: []string{"certificate is valid for", "certificate is not valid for any names"}, unavailable: true,
		hint: "the server's certificate does not name the URL's host: give a name it has with --tls-server-name"},
	{signs: []string{"tls: certificate required"}, unavailable: true,
		hint: "the server asks for a client certificate: give it with --tls-cert and --tls-key"},
	{signs: []string{"tls: unknown certificate authority", "tls: bad certificate", "tls: expired certificate", "tls: certificate unknown"}, unavailable: true,
		hint: "the server refused the client certificate (--tls-cert): it must be valid and signed by a CA the server trusts"},
	{signs: []string{"first record does not look like a TLS handshake"}, unavailable: true,
		hint: "the server does not speak TLS there: use redis://, or the server's TLS port"},
	{signs: []string{"tls:", "x509:"}, unavailable: true,
		hint: "the TLS connection failed: rediss:// needs a server with TLS and a certificate this machine trusts (or give its CA with --tls-ca); use redis:// for a plain connection"},
	{cause: engine.BadCredentials, sentinel: true, unavailable: true,
		hint: "the Sentinels refused the credentials: give theirs as sentinel-password= (and sentinel-user=) in the URL; the user and password before the @ are the master's"},
	{signs: []string{"redis: nil"}, sentinel: true, unavailable: true,
		hint: "the Sentinels know no master by the name in the URL's path: check it; SENTINEL MASTERS lists theirs"},
	{sentinel: true, unavailable: true,
		hint: "no Sentinel answered: check the host:port list of the URL (Sentinels listen on 26379 unless told otherwise) and that redis-sentinel runs there"},
	{cause: engine.BadCredentials, unavailable: true},
	{cause: engine.NoPermission, unavailable: true},
	{signs: []string{"connection refused"}, unavailable: true, hint: "is redis-server running there? Give its URL with --redis or DLOCK_REDIS"},
	{signs: []string{"i/o timeout"}, unavailable: true, hint: timeoutHint},
	{signs: []string{"cluster support disabled"}, unavailable: true, hint: "the server is not a Redis Cluster node: drop --cluster"},
	{signs: []string{"MOVED ", "CROSSSLOT"}, unavailable: true, hint: "the server is a Redis Cluster node: add --cluster"},
	{cause: engine.KeyInUse},
	{cause: engine.CounterNotInteger},
	{cause: engine.NotDeadline},
	{signs: []string{"EOF", "connection reset"}, unavailable: true,
		hint: "the server closed the connection: if it expects TLS there, use rediss://; over TLS, it may want a client certificate: give it with --tls-cert and --tls-key"},
	{signs: []string{"did not answer", "no such host", "LOADING", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "TRYAGAIN",
		"dial tcp"}, unavailable: true},
}

// diagnose returns the known cause of the error with the text msg (from oneLine), or nil.
func diagnose(msg string) *problem {
	sentinel := strings.Contains(msg, noSentinel)
	cause := engine.Diagnose(msg)
	for i := range problems {
		if p := &problems[i]; p.matches(msg, sentinel, cause) {
			return p
		}
	}
	return nil
}

// matches reports whether p is the cause of the error with the text msg, which is the
// Sentinels' error if sentinel, and whose cause the library tells as cause.
func (p *problem) matches(msg string, sentinel bool, cause engine.Diagnosis) bool {
	switch {
	case p.sentinel && !sentinel:
		return false
	case p.cause != engine.Unknown:
		return p.cause == cause
	}
	return p.signs == nil || slices.ContainsFunc(p.signs, func(sign string) bool { return strings.Contains(msg, sign) })
}
