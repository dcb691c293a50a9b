package guard

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// ErrExec is the error of Exec (or Pipelined, TxPipelined) called on the pipeline that
// Guard gives fn: the commands are sent when fn returns, guarded; sent from inside fn,
// they would not be.
var ErrExec = errors.New("dlock: the commands are sent, guarded, when fn returns: do not Exec the pipeline inside fn")

// Pipe is the pipeline Guard gives fn: it queues commands as go-redis's pipeline does and
// refuses to send them itself.
type Pipe struct {
	redis.Pipeliner
}

// NewPipe returns a Pipe that queues commands for rdb.
func NewPipe(rdb redis.UniversalClient) *Pipe { return &Pipe{rdb.Pipeline()} }

func (*Pipe) Exec(context.Context) ([]redis.Cmder, error) { return nil, ErrExec }

func (*Pipe) Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return nil, ErrExec
}

func (*Pipe) TxPipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return nil, ErrExec
}

// Pipeline and TxPipeline return p itself, so that what is queued on them is guarded too.
func (p *Pipe) Pipeline() redis.Pipeliner   { return p }
func (p *Pipe) TxPipeline() redis.Pipeliner { return p }

// Args packs cmds as guard.lua's ARGV from its third on: each command's number of
// arguments, then its arguments.
func Args(head []any, cmds []redis.Cmder) []any {
	n := len(head)
	for _, c := range cmds {
		n += 1 + len(c.Args())
	}
	args := append(make([]any, 0, n), head...)
	for _, c := range cmds {
		args = append(args, len(c.Args()))
		args = append(args, c.Args()...)
	}
	return args
}

// FirstErr is the error Guard returns with the commands' results, as go-redis's Exec
// returns it: the first command's error, redis.Nil included.
func FirstErr(cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Fail sets err as the error of every command.
func Fail(cmds []redis.Cmder, err error) {
	for _, c := range cmds {
		c.SetErr(err)
	}
}
