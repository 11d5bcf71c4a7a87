package render

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
)

// MaxNameLength bounds object names. JobSet derives "<name>-<replicatedJob>-<jobIdx>-<podIdx>-<5>"
// pod names that must stay DNS-1035 labels (≤ 63): 30 leaves room for a 10-letter replicated job
// name and five-digit indices; MPIJob, PyTorchJob and Katib trial names derive the same way.
const MaxNameLength = 30

// hashLen base-36 digits hold a full 64-bit hash (36^13 > 2^64).
const hashLen = 13

// Name returns the object name of a workload id: the id itself when it is already a DNS-1035 label
// of at most MaxNameLength characters without "--"; otherwise a sanitized prefix of the id, "--"
// and a 64-bit hash of the id. Only hashed names contain "--", so a hashed name never equals a
// verbatim one, and two hashed names collide only if their 64-bit hashes do.
func Name(id string) string {
	if verbatim(id) {
		return id
	}
	var b strings.Builder
	b.Grow(MaxNameLength)
	dash := true // suppresses leading and repeated dashes
	for i := 0; i < len(id) && b.Len() < MaxNameLength-2-hashLen; i++ {
		c := id[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			if !dash {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		if b.Len() == 0 && c >= '0' && c <= '9' {
			b.WriteString("w-") // DNS-1035 labels start with a letter
		}
		b.WriteByte(c)
		dash = false
	}
	prefix := strings.TrimRight(b.String(), "-")
	if prefix == "" {
		prefix = "w"
	}
	sum := sha256.Sum256([]byte(id))
	h := strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 36)
	return prefix + "--" + strings.Repeat("0", hashLen-len(h)) + h
}

// verbatim reports whether id can be used as a name unchanged.
func verbatim(id string) bool {
	n := len(id)
	if n == 0 || n > MaxNameLength || id[0] < 'a' || id[0] > 'z' || id[n-1] == '-' {
		return false
	}
	for i := 1; i < n; i++ {
		c := id[i]
		if c == '-' {
			if id[i-1] == '-' {
				return false
			}
			continue
		}
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
