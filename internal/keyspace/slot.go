package keyspace

import "strings"

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// Slot is the Redis Cluster hash slot of key, with Redis's hash-tag rule: if the key has a
// '{' and a '}' after it with at least one byte between the first '{' and the first '}'
// after it, only those bytes are hashed. Keys of one slot can be touched by one script.
func Slot(key string) int {
	return int(crc16(HashTag(key)) % Slots)
}

// HashTag is the part of key that Redis Cluster hashes: the text between the first '{'
// and the next '}' when there is some, else the whole key.
func HashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}

// crc16 is CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster
// uses for key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
