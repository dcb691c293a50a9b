package keyspace

import "testing"

func TestOwnerKeyAndToken(t *testing.T) {
	const id = "0123456789abcdef"
	random := "00112233445566778899aabbccddeeff"
	for _, tt := range []struct {
		token string
		id    string
		ok    bool
	}{
		{id + random, id, true},
		{random, "", false},                       // a Client with WithOwner(""), or another library's
		{"1732800000000", "", false},              // a TimestampMutex's deadline
		{"turn:" + random + "0123456", "", false}, // a promise to a process
		{"0123456789ABCDEF" + random, "", false},  // not dlock's lowercase hex
	} {
		if got, ok := ClientOf(tt.token); got != tt.id || ok != tt.ok {
			t.Errorf("ClientOf(%q) = %q, %v; want %q, %v", tt.token, got, ok, tt.id, tt.ok)
		}
	}
	for _, tt := range []struct{ prefix, want string }{
		{"dlock:", "{dlock:owner:" + id + "}:owner"},
		{"", "{owner:" + id + "}:owner"},
		{"{app}:", "{app}:owner:" + id + ":owner"}, // a prefix with a hash tag keeps its slot
	} {
		key := OwnerKey(tt.prefix, id)
		if key != tt.want || !IsOwnerKey(key) {
			t.Errorf("OwnerKey(%q) = %q (owner key: %v), want %q", tt.prefix, key, IsOwnerKey(key), tt.want)
		}
	}
	if IsOwnerKey("dlock:owner:x") || IsOwnerKey("{dlock:orders}:fence") {
		t.Error("a lock key or another companion taken for an owner key")
	}
	if !isToken(random) || !isToken(id+random) || isToken(id) {
		t.Error("isToken does not know 32- and 48-digit tokens from others")
	}
}
