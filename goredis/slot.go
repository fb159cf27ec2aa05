package goredis

import "strings"

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// crcTable is CRC-16/XMODEM (polynomial 0x1021) of every byte value.
var crcTable = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// slot is Redis Cluster's hash slot of key: CRC-16 of its hash tag (the
// text between the first '{' and the next '}', when not empty) or of the
// whole key, modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[k]]
	}
	return int(crc) % slotCount
}
