package keyspace

// A holder's token is 128 random bits in lowercase hex. A Client that names its holders
// (WithOwner) writes its own id before those bits, ClientIDLen hex digits, and the name
// in its owner key (OwnerKey) under that id: so whoever reads a token finds its owner
// with one more read, and the holder pays nothing per lock.
const (
	// ClientIDLen is the length of the Client id that begins an owned token.
	ClientIDLen = 16
	// RandomLen is the length of a token's random part, which every token ends with.
	RandomLen = 32
)

// ownerSuffix ends every owner key. It is listed in Companions so that the CLI's list
// does not take an owner key for a lock; an owner key belongs to a Client, not a lock.
const ownerSuffix = ":owner"

// OwnerKey is the key that holds the owner name of the Client with id clientID (the first
// ClientIDLen digits of its tokens): a companion, by name, of the key prefix+"owner:"+id,
// which is no lock. With a prefix that has a hash tag it shares the locks' slot.
func OwnerKey(prefix, clientID string) string {
	base := prefix + "owner:" + clientID
	if tag, err := SlotTag(base); err == nil {
		return tag + ownerSuffix
	}
	return "{" + clientID + "}" + ownerSuffix // a prefix with a stray '}': still one slot
}

// ClientOf returns the Client id an owned token begins with; ok is false for a token
// without one (a Client with WithOwner(""), another library's, a TimestampMutex deadline).
func ClientOf(token string) (id string, ok bool) {
	if len(token) != ClientIDLen+RandomLen || !isHex(token) {
		return "", false
	}
	return token[:ClientIDLen], true
}

// isToken reports whether s is a token as dlock makes them, owned or not. A tombstone's
// name ends in one, which tells it from a lock named like "{orders}:gone:x".
func isToken(s string) bool {
	return (len(s) == RandomLen || len(s) == ClientIDLen+RandomLen) && isHex(s)
}

// isHex reports whether s is lowercase hex.
func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// IsOwnerKey reports whether key is an owner key (OwnerKey), which labels a Client and
// outlives its leases by design.
func IsOwnerKey(key string) bool {
	_, suffix, ok := CompanionOf(key)
	return ok && suffix == ownerSuffix
}
