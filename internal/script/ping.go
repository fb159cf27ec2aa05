package script

// PingCall is ping.lua's call, the health check.
func PingCall() Call { return Ping.Call() }

// ParsePing reads ping.lua's reply, 1: nil when it is that.
func ParsePing(reply interface{}) error {
	_, err := oneOf(reply, 1)
	return parsed("ping", err)
}
