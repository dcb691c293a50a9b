// Package scripts holds dlock's Lua scripts. Each .lua file starts with a header that lists
// its KEYS, ARGV and reply; every key a script touches shares one Redis Cluster hash slot.
package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed mutex_acquire.lua
	mutexAcquire string
	//go:embed mutex_release.lua
	mutexRelease string
	//go:embed mutex_extend.lua
	mutexExtend string
	//go:embed fence_raise.lua
	fenceRaise string
)

// The scripts, ready for redis.Script.Run (EVALSHA, falling back to EVAL).
var (
	MutexAcquire = redis.NewScript(mutexAcquire)
	MutexRelease = redis.NewScript(mutexRelease)
	MutexExtend  = redis.NewScript(mutexExtend)
	FenceRaise   = redis.NewScript(fenceRaise)
)
