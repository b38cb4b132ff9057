//! The campaign loop of a store-led server: one [`LeaderElector`] term
//! after another, with a pause in between, publishing the server's own
//! state ([`Local`]) for the view and the API.

use super::view::Local;
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::{CancellationToken, Ended, LeaderElector};
use tokio::sync::watch;
use tracing::{info, warn};

/// Pause before campaigning again after a leadership or a session was lost
/// (a store that just expired the session is not asked again at once).
pub const CAMPAIGN_PAUSE: Duration = Duration::from_millis(200);
/// Longest pause after campaigns that failed in a row (the pause doubles
/// from [`CAMPAIGN_PAUSE`] after each failure to reach the store).
pub const CAMPAIGN_PAUSE_MAX: Duration = Duration::from_secs(5);

/// The elector's callbacks, publishing into `local`: `Leading` when elected
/// and `Idle` as soon as the leading context is cancelled.
pub(crate) fn with_callbacks(
    elector: LeaderElector,
    local: Arc<watch::Sender<Local>>,
) -> LeaderElector {
    let on_stop = local.clone();
    elector
        .on_started_leading(move |leading| {
            info!(token = leading.token, "leading: elected in the store");
            let cancel = leading.cancel.clone();
            local.send_replace(Local::Leading(leading));
            let local = local.clone();
            tokio::spawn(async move {
                cancel.cancelled().await;
                local.send_if_modified(|l| match l {
                    Local::Leading(_) => {
                        *l = Local::Idle;
                        true
                    }
                    _ => false,
                });
            });
        })
        .on_stopped_leading(move |why| {
            info!(%why, "stopped leading");
            on_stop.send_replace(Local::Idle);
        })
}

/// Campaigns until `stop` is cancelled (then resigns if it leads, which
/// hands over at once, and closes its session): after each term it pauses
/// and campaigns again.
pub(crate) async fn run(
    elector: LeaderElector,
    local: Arc<watch::Sender<Local>>,
    stop: CancellationToken,
) {
    let election = elector.election().name().to_string();
    let mut pause = CAMPAIGN_PAUSE;
    while !stop.is_cancelled() {
        local.send_replace(Local::Campaigning);
        let ended = elector.run(stop.clone()).await;
        local.send_replace(Local::Idle);
        let failed = match ended {
            Ok(Ended::Stopped) => return,
            Ok(ended @ (Ended::Lost(_) | Ended::Deposed)) => {
                pause = CAMPAIGN_PAUSE;
                warn!(%election, %ended, "the leadership ended; campaigning again after {pause:?}");
                false
            }
            Err(e) => {
                warn!(%election, error = %e, "campaign failed; again after {pause:?}");
                true
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        if failed {
            pause = (pause * 2).min(CAMPAIGN_PAUSE_MAX);
        }
    }
}
