package script

// LabelCall is label.lua's call publishing label on key for keepMs.
func LabelCall(key, label string, keepMs int64) Call { return Label.Call(key, label, keepMs) }

// LabelReadCall is label.lua's call reading the label on key.
func LabelReadCall(key string) Call { return Label.Call(key, "") }

// ParseLabel reads label.lua's reply: the label, "" when none.
func ParseLabel(reply interface{}) (string, error) {
	s, err := text(reply)
	return s, parsed("label", err)
}
