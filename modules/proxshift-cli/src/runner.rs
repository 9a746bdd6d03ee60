//! Running `ansible-playbook` (and `ansible-inventory`) as child processes. The thin, I/O part: the
//! parsing and rendering it drives live in `tracker` and `report`.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::command::Command;
use crate::exit::CliError;
use crate::output::{strip_ansi, TAGS_MARKER};
use crate::style::{paint, Style};
use crate::tracker::{render_progress, Tracker};

/// Where and how the playbook's output is shown.
pub struct Display {
    /// Stream the playbook output to stderr (with `--json`, stdout carries only the JSON).
    pub to_stderr: bool,
    /// Keep a progress line at the bottom (the stream is a terminal).
    pub progress: bool,
    pub colour: bool,
}

pub struct Outcome {
    /// `None` when the child was killed by a signal.
    pub rc: Option<i32>,
    pub interrupted: bool,
    pub elapsed: Duration,
    pub tracker: Tracker,
}

fn spawn_error(program: &str, e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::NotFound {
        CliError::tool(format!(
            "{program} not found: install ansible-core (`make venv` creates .venv/ with it) or put it on PATH"
        ))
    } else {
        CliError::tool(format!("cannot run {program}: {e}"))
    }
}

fn child(cmd: &Command) -> std::process::Command {
    let mut c = std::process::Command::new(&cmd.program);
    c.args(&cmd.args).envs(cmd.env.iter().map(|(k, v)| (k, v)));
    c
}

/// Run a command to completion and capture its stdout (stderr is passed through).
pub fn capture(cmd: &Command) -> Result<(i32, String), CliError> {
    let out = child(cmd)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| spawn_error(&cmd.program, e))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// Terminal width of stdout/stderr, else `COLUMNS`, else 80.
pub fn terminal_width(stderr: bool) -> usize {
    let fd = if stderr { 2 } else { 1 };
    // SAFETY: TIOCGWINSZ fills a plain struct; on failure we fall back.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
        return ws.ws_col as usize;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(80)
}

struct Screen {
    tracker: Tracker,
    out: Box<dyn Write + Send>,
    progress: bool,
    shown: bool,
    /// The progress line on screen, so the ticker redraws only when it changes.
    last: String,
    colour: bool,
    started: Instant,
    to_stderr: bool,
}

impl Screen {
    fn clear(&mut self) {
        if self.shown {
            let _ = self.out.write_all(b"\r\x1b[2K");
            self.shown = false;
        }
    }
    fn draw(&mut self) {
        if !self.progress {
            return;
        }
        let width = terminal_width(self.to_stderr).saturating_sub(1).max(20);
        let line = render_progress(&self.tracker.progress(self.started.elapsed()), width);
        if self.shown && line == self.last {
            return;
        }
        let _ = write!(
            self.out,
            "\r\x1b[2K{}",
            paint(&line, Style::Cyan, self.colour)
        );
        let _ = self.out.flush();
        self.shown = true;
        self.last = line;
    }
    fn line(&mut self, text: &str) {
        self.tracker.feed(text);
        // Our callback's lines are for the tracker only.
        if strip_ansi(text).starts_with(TAGS_MARKER) {
            return;
        }
        self.clear();
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.write_all(b"\n");
        self.draw();
        let _ = self.out.flush();
    }
}

/// Ignore SIGINT in this process while the child runs: Ctrl-C reaches the child (same process group),
/// ansible stops cleanly, and we still print the summary.
struct IgnoreSigint(libc::sighandler_t);

impl IgnoreSigint {
    fn new() -> Self {
        // SAFETY: setting a disposition to SIG_IGN and restoring it later.
        IgnoreSigint(unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) })
    }
}

impl Drop for IgnoreSigint {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved in `new`.
        unsafe {
            libc::signal(libc::SIGINT, self.0);
        }
    }
}

const CALLBACK: &str = include_str!("phase_callback.py");

/// The phase callback, written into a fresh private folder; removed when dropped.
struct CallbackDir(std::path::PathBuf);

impl CallbackDir {
    fn create() -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("proxshift-callback-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)?;
        std::fs::write(dir.join("proxshift_phases.py"), CALLBACK)?;
        Ok(CallbackDir(dir))
    }
}

impl Drop for CallbackDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `value` appended to a list-valued environment variable, keeping what the user set.
fn appended(name: &str, value: &str, sep: &str) -> String {
    match std::env::var(name) {
        Ok(cur) if !cur.trim().is_empty() => format!("{cur}{sep}{value}"),
        _ => value.to_string(),
    }
}

/// Run the playbook, streaming its output line by line through the tracker.
pub fn run_playbook(
    cmd: &Command,
    tracker: Tracker,
    display: &Display,
) -> Result<Outcome, CliError> {
    let mut c = child(cmd);
    // Phase hints: our callback prints each task's tags (best effort; without it, role names decide).
    let callback = CallbackDir::create().ok();
    if let Some(dir) = &callback {
        c.env(
            "ANSIBLE_CALLBACK_PLUGINS",
            appended(
                "ANSIBLE_CALLBACK_PLUGINS",
                &dir.0.display().to_string(),
                ":",
            ),
        );
        c.env(
            "ANSIBLE_CALLBACKS_ENABLED",
            appended("ANSIBLE_CALLBACKS_ENABLED", "proxshift_phases", ","),
        );
    }
    // Line-by-line output through the pipe; colour only if we show colour ourselves.
    c.env("PYTHONUNBUFFERED", "1");
    if display.colour {
        c.env("ANSIBLE_FORCE_COLOR", "1");
    } else {
        c.env("ANSIBLE_NOCOLOR", "1");
    }
    let started = Instant::now();
    let mut proc = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(Stdio::inherit())
        .spawn()
        .map_err(|e| spawn_error(&cmd.program, e))?;
    // Only after the spawn: the child must keep the default SIGINT disposition.
    let sigint = IgnoreSigint::new();
    let out: Box<dyn Write + Send> = if display.to_stderr {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let screen = Arc::new(Mutex::new(Screen {
        tracker,
        out,
        progress: display.progress,
        shown: false,
        last: String::new(),
        colour: display.colour,
        started,
        to_stderr: display.to_stderr,
    }));
    let done = Arc::new(AtomicBool::new(false));
    let ticker = display.progress.then(|| {
        let (screen, done) = (screen.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                if let Ok(mut s) = screen.lock() {
                    s.draw();
                }
            }
        })
    });
    let stdout = proc.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf);
                let text = text.trim_end_matches(['\n', '\r']);
                screen.lock().expect("screen lock").line(text);
            }
        }
    }
    let status = proc.wait().map_err(|e| spawn_error(&cmd.program, e))?;
    done.store(true, Ordering::Relaxed);
    if let Some(t) = ticker {
        let _ = t.join();
    }
    drop(sigint);
    let mut screen = Arc::try_unwrap(screen)
        .ok()
        .expect("ticker joined")
        .into_inner()
        .expect("screen lock");
    screen.clear();
    let _ = screen.out.flush();
    screen.tracker.finish();
    let rc = status.code();
    #[cfg(unix)]
    let signalled = {
        use std::os::unix::process::ExitStatusExt;
        status.signal() == Some(libc::SIGINT)
    };
    // ansible-playbook exits 99 when the user interrupts it.
    let interrupted = signalled || rc == Some(99);
    Ok(Outcome {
        rc,
        interrupted,
        elapsed: started.elapsed(),
        tracker: screen.tracker,
    })
}
