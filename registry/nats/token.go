package nats

import (
	"errors"
	"strings"
)

const hexDigits = "0123456789ABCDEF"

// EncodeToken escapes s into one token of a NATS key: letters, digits,
// '-' and '_' stay, every other byte becomes "=XX" (its value in upper
// case hex), so '.', ':', '/', '=' and non-ASCII bytes never reach the
// key. "127.0.0.1:8972" becomes "127=2E0=2E0=2E1=3A8972". The empty
// string stays empty.
func EncodeToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('=')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// DecodeToken reverses EncodeToken. It fails on a byte EncodeToken never
// writes or a malformed "=XX" escape.
func DecodeToken(tok string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '=':
			if i+2 >= len(tok) {
				return "", errors.New("nats: truncated escape in key token")
			}
			hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
			if hi < 0 || lo < 0 {
				return "", errors.New("nats: bad escape in key token")
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 2
		default:
			return "", errors.New("nats: bad character in key token")
		}
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
