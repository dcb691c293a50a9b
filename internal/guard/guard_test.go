package guard

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// TestFill: each type gets its reply as go-redis's reader would make it from the same
// Lua reply; nils follow go-redis (redis.Nil, or false and zero values where it says so).
func TestFill(t *testing.T) {
	errReply := errors.New("ERR boom")
	for _, c := range []struct {
		cmd   redis.Cmder
		reply any
		want  any
		err   error
	}{
		{redis.NewStatusCmd(ctx, "set"), "OK", "OK", nil},
		{redis.NewStringCmd(ctx, "get"), nil, "", redis.Nil},
		{redis.NewStringCmd(ctx, "get"), int64(7), "7", nil},
		{redis.NewIntCmd(ctx, "incr"), int64(3), int64(3), nil},
		{redis.NewIntCmd(ctx, "incr"), errReply, int64(0), errReply},
		{redis.NewFloatCmd(ctx, "incrbyfloat"), "1.5", 1.5, nil},
		{redis.NewBoolCmd(ctx, "set"), nil, false, nil},
		{redis.NewBoolCmd(ctx, "expire"), int64(1), true, nil},
		{redis.NewDurationCmd(ctx, time.Second, "ttl"), int64(5), 5 * time.Second, nil},
		{redis.NewDurationCmd(ctx, time.Millisecond, "pttl"), int64(-2), time.Duration(-2), nil},
		{redis.NewStringSliceCmd(ctx, "lrange"), []any{"a", nil}, []string{"a", ""}, nil},
		{redis.NewIntSliceCmd(ctx, "x"), []any{int64(1), nil}, []int64{1, 0}, nil},
		{redis.NewMapStringStringCmd(ctx, "hgetall"), []any{"f", "v"}, map[string]string{"f": "v"}, nil},
		{redis.NewZSliceCmd(ctx, "zrange"), []any{"m", "2.5"}, []redis.Z{{Member: "m", Score: 2.5}}, nil},
		{redis.NewZSliceCmd(ctx, "zpopmin"), []any{[]any{"m", "1"}}, []redis.Z{{Member: "m", Score: 1}}, nil},
		{redis.NewCmd(ctx, "get"), nil, nil, redis.Nil},
	} {
		if err := Supported(c.cmd); err != nil {
			t.Fatalf("%s: %v", c.cmd.Name(), err)
		}
		if err := Fill([]redis.Cmder{c.cmd}, []any{c.reply}); err != nil {
			t.Fatal(err)
		}
		got := reflect.ValueOf(c.cmd).MethodByName("Val").Call(nil)[0].Interface()
		if !reflect.DeepEqual(got, c.want) || c.cmd.Err() != c.err {
			t.Errorf("%T from %#v: %#v (%v), want %#v (%v)", c.cmd, c.reply, got, c.cmd.Err(), c.want, c.err)
		}
	}
}

// TestSupported: a type Fill cannot make is refused, and so is a TTL of unknown unit.
func TestSupported(t *testing.T) {
	for _, cmd := range []redis.Cmder{
		redis.NewXMessageSliceCmd(ctx, "xrange"),
		redis.NewDurationCmd(ctx, time.Second, "object", "idletime"),
	} {
		if Supported(cmd) == nil {
			t.Errorf("%T %s supported", cmd, cmd.FullName())
		}
	}
}

// TestArgs: each command is its number of arguments followed by them.
func TestArgs(t *testing.T) {
	cmds := []redis.Cmder{redis.NewIntCmd(ctx, "incr", "k"), redis.NewStatusCmd(ctx, "set", "k", 1)}
	got := Args([]any{"tok", "s"}, cmds)
	want := []any{"tok", "s", 2, "incr", "k", 3, "set", "k", 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

// TestKeysOf: the keys at a command's positions, counted from either end, by step.
func TestKeysOf(t *testing.T) {
	specs.Store("test-mset", spec{first: 1, last: -1, step: 2})
	specs.Store("test-keyless", spec{})
	keys, err := keysOf(ctx, nil, redis.NewStatusCmd(ctx, "test-mset", "a", 1, []byte("b"), 2))
	if err != nil || !reflect.DeepEqual(keys, []string{"a", "b"}) {
		t.Fatalf("%v, %v", keys, err)
	}
	if keys, _ := keysOf(ctx, nil, redis.NewStatusCmd(ctx, "test-keyless")); keys != nil {
		t.Fatalf("keyless: %v", keys)
	}
}
