//! What a long command shows while it works: a spinner with the time so far on stderr, drawn
//! only on a terminal (indicatif hides it elsewhere, so logs and pipes stay clean), and the
//! heartbeat of an agent run waiting for its model.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner saying `what` with the time so far; cleared when dropped (on an error too).
pub fn spinner(what: &str) -> Spinner {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    Spinner(bar)
}

/// A drawn spinner ([`spinner`]).
pub struct Spinner(ProgressBar);

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// How often a run waiting for its model says so where no spinner is drawn (a log file).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// The wait for a model's reply: on a terminal a spinner with the seconds so far; elsewhere a
/// line every [`HEARTBEAT`] (a log shows the run is alive, not hung).
pub struct ModelWait {
    _bar: Spinner,
    stop: Option<std::sync::mpsc::Sender<()>>,
}

impl ModelWait {
    pub fn start(round: &str) -> ModelWait {
        let bar = spinner(&format!("round {round}: waiting for the model"));
        let stop = bar.0.is_hidden().then(|| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let round = round.to_string();
            let since = Instant::now();
            std::thread::spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(HEARTBEAT)
                {
                    tell!(
                        "round {round}: still waiting for the model ({} s)",
                        since.elapsed().as_secs()
                    );
                }
            });
            tx
        });
        ModelWait { _bar: bar, stop }
    }
}

impl Drop for ModelWait {
    fn drop(&mut self) {
        // The heartbeat's thread ends when its sender goes; the spinner clears itself.
        self.stop.take();
    }
}
