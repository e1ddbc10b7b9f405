package firstboot

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxEventBytes bounds the body of one event a guest posts to bootreport.EventsPath.
// cloud-init's events are a few hundred bytes; a finish event may carry
// "files" (base64 contents some datasources attach), which are not kept.
const MaxEventBytes = 16 << 10

// cloudInitEvent is the JSON body cloud-init's reporting webhook handler
// posts for one event (cloudinit/reporting/events.py, as_dict, in
// cloud-init 22.4): a start event has no result; a finish event has one,
// and "files" when the event was asked to post some.
type cloudInitEvent struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	EventType   string `json:"event_type"`
	// Origin is always "cloudinit" in 22.4 (events.py's only origin).
	Origin string `json:"origin"`
	// Timestamp is the guest's clock, often wrong at first boot: the
	// tracker uses its own.
	Timestamp json.RawMessage `json:"timestamp"`
	Result    string          `json:"result"`
	Files     json.RawMessage `json:"files"`
}

// ParseCloudInitEvent reads one event as cloud-init's webhook handler
// posts it: a JSON object with name ("stage" or "stage/module"),
// description, event_type (start or finish), origin, timestamp and, for a
// finish, result (SUCCESS, WARN or FAIL). The description becomes the
// event's message; the origin, the guest's timestamp and any files are
// dropped. The
// event returned is one Tracker.Record takes; an error (wrapping
// ErrEvent) says what is wrong in a short sentence a guest's operator can
// read.
func ParseCloudInitEvent(body []byte) (Event, error) {
	if len(body) > MaxEventBytes {
		return Event{}, fmt.Errorf("%w: %d bytes: an event is at most %d", ErrEvent, len(body), MaxEventBytes)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return Event{}, fmt.Errorf("%w: want a JSON object, as cloud-init's webhook handler posts", ErrEvent)
	}
	var in cloudInitEvent
	if err := json.Unmarshal(body, &in); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	ev := Event{Kind: in.EventType, Name: in.Name, Result: in.Result, Message: in.Description}
	if err := check(&ev); err != nil {
		return Event{}, err
	}
	ev.Name, ev.Message = clip(ev.Name, MaxName), clip(ev.Message, MaxMessage)
	return ev, nil
}
