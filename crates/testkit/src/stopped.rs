//! A SIGSTOP that has taken effect, for the etcd and the ZooKeeper
//! launchers.

use std::time::{Duration, Instant};

/// Waits until every thread of `pid` is stopped, so that a test's next
/// request cannot be answered by a thread the SIGSTOP has not reached yet
/// (CI saw a paused etcd member answer a read 1.8 ms after `kill -STOP`).
pub fn wait_stopped(pid: u32) {
    // Generous: a thread in an fsync stops only once the disk answers.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
        let running = tasks.flatten().any(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state is the first field after the command's closing paren.
            let state =
                stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('T' | 't') | None)
        });
        if !running {
            return;
        }
        assert!(Instant::now() < until, "process {pid} not stopped 10 s after SIGSTOP");
        std::thread::sleep(Duration::from_millis(1));
    }
}
