package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A node whose INFO server shows Redis before 7.0 is refused at set-up with
// a clear error: renewal needs PEXPIRE's GT option.
func TestUnitSupportedServers(t *testing.T) {
	for _, tc := range []struct {
		info string
		ok   bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\nrun_id:x\r\n", true},
		{"# Server\r\nredis_version:7.2.4\r\nvalkey_version:8.0.1\r\n", true},
		{"# Server\r\nredis_version:8.2.0\r\n", true},
		{"# Server\r\nrun_id:x\r\n", true}, // nothing to say: not refused
		{"# Server\r\nredis_version:6.2.14\r\n", false},
		{"# Server\r\nredis_version:5.0.7\r\n", false},
	} {
		err := supported(tc.info, errInvalid)
		if tc.ok {
			assert.NoError(t, err, tc.info)
			continue
		}
		assert.ErrorIs(t, err, errInvalid, tc.info)
		assert.ErrorContains(t, err, "needs Redis 7.0 or later")
	}
}

// TestUnitTLSHandshakeError: a failed handshake asks whether the port
// serves TLS, but not when a certificate was refused, which says that it
// does; the cause stays visible to errors.Is and errors.As.
func TestUnitTLSHandshakeError(t *testing.T) {
	const addr = "cache.example:6380"
	cert := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	tests := []struct {
		name string
		err  error
		ask  bool
	}{
		{"timeout", context.DeadlineExceeded, true},
		{"no TLS record", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{"closed", io.EOF, true},
		{"certificate refused", cert, false},
		{"refused by the server", tls.AlertError(42), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := handshakeError(addr, tt.err)
			assert.ErrorIs(t, err, tt.err)
			assert.True(t, strings.HasPrefix(err.Error(), "TLS handshake with "+addr+" failed: "), err.Error())
			assert.Equal(t, tt.ask, strings.Contains(err.Error(), "is the server serving TLS on this port?"), err.Error())
		})
	}
}
