package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
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
	msg := err.Error()
	for _, s := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "invalid username-password",
		"connection refused", "i/o timeout", "did not answer", "no such host", "LOADING", "CLUSTERDOWN",
		"MASTERDOWN", "READONLY", "TRYAGAIN", "tls:", "x509:", "dial tcp", "connection reset",
		"cluster support disabled", "MOVED "} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
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

// explainRedis adds what to do to the Redis errors whose cause is a setting or a server
// that is not there.
func explainRedis(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "the server refused the credentials"):
		return msg // already explained by the library
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return msg + " (the server refused the credentials: check the user and password in the --redis URL or DLOCK_REDIS)"
	case strings.Contains(msg, "NOPERM"):
		return msg + " (the Redis user lacks a permission dlock needs: check its ACL)"
	case strings.Contains(msg, "connection refused"):
		return msg + " (is redis-server running there? Give its URL with --redis or DLOCK_REDIS)"
	case strings.Contains(msg, "i/o timeout"), errors.Is(err, context.DeadlineExceeded):
		return msg + " (the server did not answer in time: is the address right and the server up?)"
	case strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"), strings.Contains(msg, "first record does not look like a TLS handshake"):
		return msg + " (the TLS connection failed: rediss:// needs a server with TLS and a certificate this machine trusts; use redis:// for a plain connection)"
	case strings.Contains(msg, "cluster support disabled"):
		return msg + " (the server is not a Redis Cluster node: drop --cluster)"
	case strings.HasPrefix(msg, "MOVED "), strings.Contains(msg, ": MOVED "), strings.HasPrefix(msg, "CROSSSLOT"):
		return msg + " (the server is a Redis Cluster node: add --cluster)"
	case strings.Contains(msg, "WRONGTYPE"):
		return msg + " (a key of the lock is used by something else: choose another name or --prefix)"
	}
	return msg
}
