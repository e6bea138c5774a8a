// Package savefile writes bytes a user asked to keep (a plan, a record's
// payload) to a path they named, without ever turning what is there into
// something else: a device or pipe is written in place (never renamed
// over: `--out /dev/null` run as root once replaced /dev/null with a
// regular file for the whole machine), a directory is refused, and an
// existing file is replaced only when the caller says so, whole or not at
// all.
package savefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrExists: path is an existing regular file and replace was not asked.
var ErrExists = errors.New("already exists")

// Write writes data to path and returns path made absolute:
//   - a device, pipe or socket is opened for writing and written in place;
//   - a directory is refused;
//   - an existing regular file is refused (ErrExists) unless replace; then
//     the data is written to a file beside it, synced and renamed over it,
//     so a crash leaves the old file or the new one, never half of it;
//   - otherwise a new file is created, mode 0600: with replace the same
//     way (beside it, then renamed: a plan killed half-written leaves no
//     half a plan); without, created exclusively (a file that appears
//     meanwhile is not replaced) and removed when the write fails.
func Write(path string, data []byte, replace bool) (string, error) {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, replace)
}

// WriteFunc is Write of what write writes, as it writes it: a document of
// tens of megabytes (a plan of a million records) need not be held whole
// to be saved. An error from write is a failed write: nothing replaced, a
// file it created removed.
func WriteFunc(path string, write func(io.Writer) error, replace bool) (string, error) {
	abs, st, err := Check(path, replace)
	switch {
	case err != nil:
		return abs, err
	case st != nil && !st.Mode().IsRegular():
		return abs, writeTo(abs, os.O_WRONLY, write)
	case st != nil || replace:
		return abs, replaceFile(abs, write)
	}
	if err := writeTo(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, write); err != nil {
		if errors.Is(err, os.ErrExist) {
			return abs, fmt.Errorf("%s %w", abs, ErrExists)
		}
		return abs, err
	}
	return abs, nil
}

// Check is Write's refusal without writing, for a caller that writes
// several files and must refuse before the first: path made absolute, and
// what is there (nil when nothing is).
func Check(path string, replace bool) (string, os.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return abs, nil, nil
	case err != nil:
		return abs, nil, err
	case st.IsDir():
		return abs, st, fmt.Errorf("%s is a directory", abs)
	case st.Mode().IsRegular() && !replace:
		return abs, st, fmt.Errorf("%s %w", abs, ErrExists)
	}
	return abs, st, nil
}

// writeTo opens path with flag and writes to it; a file it created is
// removed when the write fails.
func writeTo(path string, flag int, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && flag&os.O_CREATE != 0 {
		os.Remove(path)
	}
	return err
}

func replaceFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".berth-save-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
