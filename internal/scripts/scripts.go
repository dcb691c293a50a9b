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
	//go:embed pass_on.lua
	passOn string // the prelude of mutex_release and multi_release
	//go:embed multi_acquire.lua
	multiAcquire string
	//go:embed multi_release.lua
	multiRelease string
	//go:embed multi_extend.lua
	multiExtend string
	//go:embed fence_raise.lua
	fenceRaise string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_release.lua
	fairRelease string
	//go:embed grant_channel.lua
	grantChannel string // the prelude of the scripts that tell a FairMutex waiter
	//go:embed mutex_asks.lua
	mutexAsks string // the prelude of the scripts that keep a Mutex's standing requests
	//go:embed gone.lua
	goneLua string // the prelude of the scripts that keep tombstones
	//go:embed rw_read_acquire.lua
	rwReadAcquire string
	//go:embed rw_write_acquire.lua
	rwWriteAcquire string
	//go:embed member_release.lua
	memberRelease string
	//go:embed member_extend.lua
	memberExtend string
	//go:embed waiter_leave.lua
	waiterLeave string
	//go:embed semaphore_acquire.lua
	semaphoreAcquire string
	//go:embed refusal.lua
	refusal string // the prelude of every acquire script
	//go:embed lock_read.lua
	lockRead string // the prelude of inspect and force_unlock
	//go:embed inspect.lua
	inspect string
	//go:embed force_unlock.lua
	forceUnlock string
	//go:embed stamp_acquire.lua
	stampAcquire string
	//go:embed stamp_extend.lua
	stampExtend string
	//go:embed stamp_release.lua
	stampRelease string
	//go:embed stamp_owned.lua
	stampOwned string // the prelude of stamp_extend and stamp_release
	//go:embed owner.lua
	owner string
	//go:embed guard.lua
	guard string
	//go:embed election_proclaim.lua
	electionProclaim string
	//go:embed election_read.lua
	electionRead string
)

// The scripts, ready for redis.Script.Run (EVALSHA, falling back to EVAL).
var (
	MutexAcquire     = redis.NewScript(refusal + goneLua + mutexAsks + mutexAcquire)
	MutexRelease     = redis.NewScript(goneLua + mutexAsks + passOn + mutexRelease)
	MutexExtend      = redis.NewScript(goneLua + mutexExtend)
	MultiAcquire     = redis.NewScript(refusal + goneLua + multiAcquire)
	MultiRelease     = redis.NewScript(goneLua + mutexAsks + passOn + multiRelease)
	MultiExtend      = redis.NewScript(goneLua + multiExtend)
	FenceRaise       = redis.NewScript(fenceRaise)
	FairAcquire      = redis.NewScript(refusal + goneLua + fairAcquire)
	FairRelease      = redis.NewScript(goneLua + grantChannel + fairRelease)
	RwReadAcquire    = redis.NewScript(refusal + goneLua + rwReadAcquire)
	RwWriteAcquire   = redis.NewScript(refusal + goneLua + rwWriteAcquire)
	MemberRelease    = redis.NewScript(memberRelease)
	MemberExtend     = redis.NewScript(goneLua + memberExtend)
	WaiterLeave      = redis.NewScript(goneLua + waiterLeave)
	SemaphoreAcquire = redis.NewScript(refusal + goneLua + semaphoreAcquire)
	Inspect          = redis.NewScript(lockRead + inspect)
	ForceUnlock      = redis.NewScript(lockRead + grantChannel + forceUnlock)
	StampAcquire     = redis.NewScript(refusal + goneLua + stampAcquire)
	StampExtend      = redis.NewScript(goneLua + stampOwned + stampExtend)
	StampRelease     = redis.NewScript(stampOwned + stampRelease)
	Owner            = redis.NewScript(owner)
	Guard            = redis.NewScript(GuardSrc)
	ElectionProclaim = redis.NewScript(electionProclaim)
	ElectionRead     = redis.NewScript(electionRead)
)

// GuardSrc is Guard's source, which internal/guard sends itself with EVAL where the server
// lost the script: go-redis's Script keeps its source to itself, and resends it on a path
// that retries.
var GuardSrc = goneLua + guard
