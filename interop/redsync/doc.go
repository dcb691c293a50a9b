// Package redsync tests that dlock and redsync (github.com/go-redsync/redsync/v4), another
// Go Redlock client, share a lock: on the same bare key (dlock's WithPrefix("")), each
// excludes the other, and each side's waiter gets the lock promptly after the other's
// release. It is a module of its own, joined by go.work, so that redsync never enters
// dlock's go.mod; it has tests only.
package redsync
