package script

// WithdrawCall is withdraw.lua's call taking the waiter's intent back from
// the intent keys; channels, one per key or none, are told that it went.
func WithdrawCall(keys []string, intent string, channels []string) Call {
	sha := Withdraw.Begin(len(keys), 1+len(channels))
	for _, k := range keys {
		sha = append(sha, k)
	}
	sha = append(sha, intent)
	for _, ch := range channels {
		sha = append(sha, ch)
	}
	return Withdraw.Made(sha)
}

// ParseWithdraw reads withdraw.lua's reply: how many intents went.
func ParseWithdraw(reply interface{}) (int64, error) {
	n, err := integer(reply)
	return n, parsed("withdraw", err)
}
