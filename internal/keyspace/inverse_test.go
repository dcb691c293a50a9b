package keyspace

import "testing"

// TestCompanionOf: the CLI's list tells companion keys from lock keys, and finds a readers set's lock.
func TestCompanionOf(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{ // the companion's slot tag and suffix; "" for a lock key
		"dlock:orders:42":                                    "",
		"{dlock:orders:42}:fence":                            "{dlock:orders:42} :fence",
		"{dlock:x}:queue:deadlines":                          "{dlock:x} :queue:deadlines",
		"{dlock:x}:readers":                                  "{dlock:x} :readers",
		"dlock:{o}:42:permits":                               "dlock:{o}:42 :permits",
		"{dlock:x}:granted:0123abcd":                         "{dlock:x} :granted:",
		"{dlock:a:granted:b}:granted:tok":                    "{dlock:a:granted:b} :granted:",
		"{dlock:x}:gone:0123456789abcdef0123456789abcdef":    "{dlock:x} :gone:",
		"dlock:{o}:42:gone:0123456789abcdef0123456789abcdef": "dlock:{o}:42 :gone:",
		"dlock:{orders}:gone:archive":                        "", // a lock named "{orders}:gone:archive"
		"{dlock:x}:gone:0123456789ABCDEF0123456789ABCDEF":    "", // not a token dlock makes
		"dlock:job:gone:x":                                   "",
		"dlock:job:readers":                                  "", // a lock named "job:readers"
		"dlock:job:granted:x":                                "",
		"{dlock:x}y:readers":                                 "{dlock:x}y :readers",
		"dlock:weird}:fence":                                 "",
		"dlock:{o}:42:queue:deadlines:fence":                 "dlock:{o}:42:queue:deadlines :fence",
	} {
		tag, suffix, ok := CompanionOf(key)
		got := ""
		if ok {
			got = tag + " " + suffix
		}
		if got != want {
			t.Errorf("CompanionOf(%q) = %q, want %q", key, got, want)
		}
	}
	for _, tt := range []struct{ tag, prefix, lock string }{
		{"{dlock:x}", "dlock:", "dlock:x"},
		{"dlock:{o}:42", "dlock:", "dlock:{o}:42"},
		{"{x}", "", "x"},
		{"{app}:job", "{app}:", "{app}:job"},
		{"{other:x}", "dlock:", ""},
		{"{dlock:{o}:42}", "dlock:", ""}, // the tag of no lock under the prefix
	} {
		lock, ok := LockOfTag(tt.tag, tt.prefix)
		if lock != tt.lock || ok != (tt.lock != "") {
			t.Errorf("LockOfTag(%q, %q) = %q, %v; want %q", tt.tag, tt.prefix, lock, ok, tt.lock)
		}
	}
}
