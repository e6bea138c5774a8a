package backends

import (
	"errors"
	"fmt"
)

// Causes a caller may branch on, whichever broker returned them: match with
// errors.Is. The message around them still names the address and the cause
// in the backend's words; these only classify it.
var (
	// ErrUnreachable: no connection, or no answer within the timeout.
	ErrUnreachable = errors.New("unreachable")
	// ErrAuth: the server refused the credentials.
	ErrAuth = errors.New("authentication failed")
	// ErrNotFound: the named queue, topic or vhost does not exist.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly: a write refused because the context or cluster is
	// read-only. internal/actions.ErrReadOnly is this same value; a backend
	// refuses with it only as a last line behind the actions layer.
	ErrReadOnly = errors.New("the context is read-only")
	// ErrNoPlan: no stored redrive plan's hash starts with the prefix
	// given (see NoPlan).
	ErrNoPlan = errors.New("not in the plan store")
	// ErrAmbiguousPlan: more than one stored plan's hash starts with the
	// prefix given (see AmbiguousPlan).
	ErrAmbiguousPlan = errors.New("ambiguous")
	// ErrTakenOver: a run's write refused because another run of the
	// same plan started since and took it over (Kafka: the newer run's
	// transactional producer fenced this one's).
	ErrTakenOver = errors.New("taken over by another run of the plan")
)

// NoPlan is the one wording of a plan hash prefix that no stored plan
// has, on both backends: "plan PREFIX: not in the plan store (STORE)",
// STORE naming where the backend keeps plans. It matches ErrNoPlan.
func NoPlan(prefix, store string) error {
	return Failure(fmt.Sprintf("plan %s: %v (%s)", prefix, ErrNoPlan, store), ErrNoPlan)
}

// AmbiguousPlan is the one wording of a plan hash prefix that n stored
// plans share, on both backends: "plan PREFIX: ambiguous, N plans match:
// give more digits". It matches ErrAmbiguousPlan.
func AmbiguousPlan(prefix string, n int) error {
	return Failure(fmt.Sprintf("plan %s: %v, %d plans match: give more digits", prefix, ErrAmbiguousPlan, n), ErrAmbiguousPlan)
}

// Failure is an error that prints msg and matches each of causes with
// errors.Is and errors.As. It lets a backend keep a message written for the
// user (address named, credentials masked) without flattening the causes a
// caller branches on. A cause whose own text may hold a secret must not be
// passed: errors.Unwrap would hand it to whoever prints it.
func Failure(msg string, causes ...error) error {
	f := &failure{msg: msg}
	for _, c := range causes {
		if c != nil {
			f.causes = append(f.causes, c)
		}
	}
	return f
}

type failure struct {
	msg    string
	causes []error
}

func (f *failure) Error() string   { return f.msg }
func (f *failure) Unwrap() []error { return f.causes }
