package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// TokenBytes is the number of random bytes in a token (256 bits).
const TokenBytes = 32

// TokenLength is the length of a raw token: TokenBytes in unpadded
// base64url.
const TokenLength = 43 // base64.RawURLEncoding.EncodedLen(TokenBytes)

// NewToken returns a fresh random token: raw goes into the link and is never
// stored; hash is the lowercase hex SHA-256 of raw, the only form kept.
func NewToken() (raw, hash string, err error) {
	var b [TokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("new approval token: %w", err)
	}
	raw = base64.RawURLEncoding.EncodeToString(b[:])
	return raw, hashRaw(raw), nil
}

// HashToken returns the hash under which raw is stored. It reports false,
// without hashing, when raw cannot be a token: a wrong length, a character
// outside the base64url alphabet, or trailing bits a real token never has.
func HashToken(raw string) (hash string, ok bool) {
	if !WellFormed(raw) {
		return "", false
	}
	return hashRaw(raw), true
}

// WellFormed reports whether raw has the shape of a token NewToken returns.
func WellFormed(raw string) bool {
	if len(raw) != TokenLength {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if !isTokenChar(raw[i]) {
			return false
		}
	}
	// Strict decoding also rejects a last character whose unused low bits
	// are set, so each token has exactly one spelling.
	_, err := base64.RawURLEncoding.Strict().DecodeString(raw)
	return err == nil
}

// Link returns the approval link {baseURL}/approvals/{raw}; trailing slashes
// of baseURL are dropped.
func Link(baseURL, raw string) string {
	return strings.TrimRight(baseURL, "/") + "/approvals/" + raw
}

func hashRaw(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

func isTokenChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
