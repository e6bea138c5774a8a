package bundled

import (
	"container/list"
	"io"
	"os"
	"sync"

	"github.com/berth-dev/berth/backends/bundled/internal/kfake"
)

// budgetFS is the filesystem the bundled broker persists through. kfake
// keeps every written partition's segment and index open, and every sealed
// segment it has read: two or more descriptors per partition, which at
// 10,000 partitions exceeds any default limit. budgetFS hands kfake
// virtual files instead: at most max real descriptors are open at once;
// when another is needed the least recently used one is closed, and a
// closed file is reopened on its next use at the position it had. Reads,
// appends, seeks, truncation and fsync behave as on the real file (fsync
// applies to the file, whichever descriptor issues it).
type budgetFS struct {
	max int

	mu   sync.Mutex
	lru  *list.List // of *budgetFile with an open descriptor, most recent first
	open int
}

func newBudgetFS(max int) *budgetFS {
	if max < 1 {
		max = 1
	}
	return &budgetFS{max: max, lru: list.New()}
}

// budgetFile is one virtual file. Its descriptor may be closed between
// operations; pos is where it was, restored on reopening (writes to an
// O_APPEND file go to the end whatever pos says).
type budgetFile struct {
	fs     *budgetFS
	name   string
	flag   int // for reopening: without O_CREATE, O_TRUNC, O_EXCL
	perm   os.FileMode
	pos    int64
	f      *os.File      // nil while closed
	elem   *list.Element // in fs.lru while open
	closed bool          // Close was called
}

// OpenFile opens the file now (creating or truncating as asked), so errors
// surface where kfake expects them.
func (b *budgetFS) OpenFile(name string, flag int, perm os.FileMode) (kfake.File, error) {
	bf := &budgetFile{fs: b, name: name, flag: flag &^ (os.O_CREATE | os.O_TRUNC | os.O_EXCL), perm: perm}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.makeRoom(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	b.track(bf, f)
	return bf, nil
}

// makeRoom closes least recently used descriptors until one more fits.
// Called with b.mu held.
func (b *budgetFS) makeRoom() error {
	for b.open >= b.max {
		back := b.lru.Back()
		if back == nil {
			return nil
		}
		victim := back.Value.(*budgetFile)
		if err := victim.release(); err != nil {
			return err
		}
	}
	return nil
}

func (b *budgetFS) track(bf *budgetFile, f *os.File) {
	bf.f = f
	bf.elem = b.lru.PushFront(bf)
	b.open++
}

// release closes bf's descriptor, remembering its position. Called with
// fs.mu held.
func (bf *budgetFile) release() error {
	if bf.f == nil {
		return nil
	}
	// The read position (an O_APPEND file's writes go to the end
	// whatever it is, but kfake seeks it to read).
	if p, err := bf.f.Seek(0, io.SeekCurrent); err == nil {
		bf.pos = p
	}
	err := bf.f.Close()
	bf.f = nil
	bf.fs.lru.Remove(bf.elem)
	bf.elem = nil
	bf.fs.open--
	return err
}

// use runs op on an open descriptor, reopening it first when it was closed
// to make room.
func (bf *budgetFile) use(op func(f *os.File) error) error {
	b := bf.fs
	b.mu.Lock()
	defer b.mu.Unlock()
	if bf.closed {
		return os.ErrClosed
	}
	if bf.f == nil {
		if err := b.makeRoom(); err != nil {
			return err
		}
		f, err := os.OpenFile(bf.name, bf.flag, bf.perm)
		if err != nil {
			return err
		}
		if bf.pos != 0 {
			if _, err := f.Seek(bf.pos, io.SeekStart); err != nil {
				f.Close()
				return err
			}
		}
		b.track(bf, f)
	} else {
		b.lru.MoveToFront(bf.elem)
	}
	return op(bf.f)
}

func (bf *budgetFile) Write(p []byte) (n int, err error) {
	err = bf.use(func(f *os.File) error { n, err = f.Write(p); return err })
	return n, err
}

func (bf *budgetFile) Read(p []byte) (n int, err error) {
	err = bf.use(func(f *os.File) error { n, err = f.Read(p); return err })
	return n, err
}

func (bf *budgetFile) Seek(offset int64, whence int) (pos int64, err error) {
	err = bf.use(func(f *os.File) error { pos, err = f.Seek(offset, whence); return err })
	return pos, err
}

func (bf *budgetFile) Truncate(size int64) error {
	return bf.use(func(f *os.File) error { return f.Truncate(size) })
}

func (bf *budgetFile) Sync() error {
	return bf.use(func(f *os.File) error { return f.Sync() })
}

func (bf *budgetFile) Close() error {
	b := bf.fs
	b.mu.Lock()
	defer b.mu.Unlock()
	if bf.closed {
		return os.ErrClosed
	}
	bf.closed = true
	return bf.release()
}

func (b *budgetFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (b *budgetFS) Remove(name string) error             { return os.Remove(name) }
func (b *budgetFS) RemoveAll(path string) error          { return os.RemoveAll(path) }
func (b *budgetFS) MkdirAll(path string, perm os.FileMode) error {
	return os.MkdirAll(path, perm)
}
func (b *budgetFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// ReadFile and Stat open a descriptor of their own for a moment: room is
// made for it first.
func (b *budgetFS) ReadFile(name string) ([]byte, error) {
	b.mu.Lock()
	err := b.makeRoomFor(1)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(name)
}

func (b *budgetFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// makeRoomFor leaves n descriptors free below the budget. Called with b.mu held.
func (b *budgetFS) makeRoomFor(n int) error {
	for b.open+n > b.max && b.lru.Len() > 0 {
		if err := b.lru.Back().Value.(*budgetFile).release(); err != nil {
			return err
		}
	}
	return nil
}
