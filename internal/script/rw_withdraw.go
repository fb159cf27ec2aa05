package script

// RWWithdrawCall is rw_withdraw.lua's call taking the writer's intent, on
// key intent, back.
func RWWithdrawCall(intent, field string) Call { return RWWithdraw.Call(intent, field) }

// ParseRWWithdraw reads rw_withdraw.lua's reply: whether the intent was
// there and went.
func ParseRWWithdraw(reply interface{}) (bool, error) {
	n, err := oneOf(reply, 0, 1)
	return n == 1, parsed("rw_withdraw", err)
}
