package redlock

import "github.com/redlock-go/redlock/internal/nodeurl"

// parseURL parses one node URL (internal/nodeurl), leading and trailing
// space trimmed; errors wrap ErrInvalid and never echo a password, in the
// userinfo or in a query parameter.
func parseURL(raw string) (nodeurl.Endpoint, error) {
	ep, err := nodeurl.Parse(raw)
	if err != nil {
		return nodeurl.Endpoint{}, invalid("%s", err)
	}
	return ep, nil
}
