package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemoEmbedded(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--buyers", "6", "--stock", "20"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	checkDemo(t, out.String(), 20)
}

func TestDemoRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--redis", "redis://" + srv.Addr, "--stock", "30"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	checkDemo(t, out.String(), 30)
}

func checkDemo(t *testing.T, out string, stock int) {
	t.Helper()
	t.Log("\n" + out)
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 5 && fields[0] == "with" && fields[1] == "dlock" {
			if fields[2] != strconv.Itoa(stock) || fields[3] != "0" || fields[4] != "0" {
				t.Fatalf("locked run: %q, want %d sold, 0 left, 0 oversold", line, stock)
			}
			return
		}
	}
	t.Fatalf("no 'with dlock' row in:\n%s", out)
}

func TestBadUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"demo", "--buyers", "0"}, 2, "at least 1"},
		{[]string{"demo", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"demo", "--redis", "redis://user:hunter2@127.0.0.1:1/notadb"}, 1, "bad --redis URL"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errOut)
		all := out.String() + errOut.String()
		if code != tt.code || !strings.Contains(all, tt.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d and %q", tt.args, code, all, tt.code, tt.want)
		}
		if strings.Contains(all, "hunter2") {
			t.Errorf("%v: the password appears in the output: %q", tt.args, all)
		}
	}
}
