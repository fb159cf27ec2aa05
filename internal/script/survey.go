package script

import "fmt"

// SurveyKeys are the keys of every kind of lock of one name, as
// survey.lua takes them.
type SurveyKeys struct {
	Lock, Intent                string   // the Mutex's lock hash and its waiters' intent
	Writer, Readers             string   // the RWMutex's writer lock hash and readers' hash
	WriterIntent, ReadersIntent string   // the RWMutex's intents: a waiting writer's, the readers'
	Own                         string   // what a reader's own hash is named after its owner field
	SemaphoreIntent             string   // the Semaphore waiters' intent
	Slots                       []string // the Semaphore's slots' lock hashes, in slot order
}

// SurveyCall is survey.lua's call: every kind of lock of one name on a
// node, read at once.
func SurveyCall(k SurveyKeys) Call {
	sha := Survey.Begin(7+len(k.Slots), 1)
	sha = append(sha, k.Lock, k.Intent, k.Writer, k.Readers, k.WriterIntent, k.ReadersIntent, k.SemaphoreIntent)
	for _, s := range k.Slots {
		sha = append(sha, s)
	}
	return Survey.Made(append(sha, k.Own))
}

// Text is a string key's state in survey.lua's reply.
type Text struct {
	PTTL  int64  // the key's PTTL (-2: no key; -1: no expiry)
	Value string // its value; "" when there is no key
}

// NameView is survey.lua's reply.
type NameView struct {
	Lock                        LockView // the Mutex's lock hash
	Intent                      Text     // the Mutex's waiters' intent
	Writer, Readers             LockView // the RWMutex's writer hash and its live readers
	WriterIntent, ReadersIntent Text     // the RWMutex's intents
	SemaphoreIntent             Text     // the Semaphore waiters' intent
	Slots                       []LockView
}

// ParseSurvey reads survey.lua's reply to a call with slots slots.
func ParseSurvey(reply interface{}, slots int) (NameView, error) {
	v, err := parseSurvey(reply, slots)
	return v, parsed("survey", err)
}

func parseSurvey(reply interface{}, slots int) (NameView, error) {
	vs, err := array(reply)
	if err != nil {
		return NameView{}, err
	}
	if len(vs) != 7+slots {
		return NameView{}, fmt.Errorf("reply of %d entries, want %d", len(vs), 7+slots)
	}
	var v NameView
	for i, h := range []*LockView{&v.Lock, nil, &v.Writer, &v.Readers} {
		if h != nil {
			if *h, err = parseView(vs[i]); err != nil {
				return NameView{}, err
			}
		}
	}
	for i, t := range []*Text{1: &v.Intent, 4: &v.WriterIntent, 5: &v.ReadersIntent, 6: &v.SemaphoreIntent} {
		if t == nil {
			continue
		}
		if *t, err = parseText(vs[i]); err != nil {
			return NameView{}, err
		}
	}
	v.Slots = make([]LockView, slots)
	for i := range v.Slots {
		if v.Slots[i], err = parseView(vs[7+i]); err != nil {
			return NameView{}, err
		}
	}
	return v, nil
}

// parseText reads a string key's entry: {pttl, value}, or {-2}.
func parseText(reply interface{}) (Text, error) {
	vs, err := array(reply)
	if err != nil {
		return Text{}, err
	}
	switch len(vs) {
	case 1:
		_, err := oneOf(vs[0], -2)
		return Text{PTTL: -2}, err
	case 2:
		var t Text
		if t.PTTL, err = integer(vs[0]); err != nil {
			return Text{}, err
		}
		t.Value, err = text(vs[1])
		return t, err
	}
	return Text{}, fmt.Errorf("an entry of %d values, want a PTTL and a value", len(vs))
}
