//! A blackholing TCP proxy between one fleet host and PostgreSQL: silent packet loss without
//! network namespaces. The host connects to the proxy's loopback port; each accepted connection
//! is piped to the target node in both directions. A [`Switch`] shared by a host's proxies (one
//! per PostgreSQL node) turns them into a black hole: every byte read in either direction is
//! swallowed, and nothing is closed, so the host's statements and new connections hang as they
//! do when a network drops packets.
//!
//! Healing says what became of the swallowed bytes, as TCP would: [`Heal::Deliver`] sends them
//! on, late (the retransmissions got through), [`Heal::Reset`] closes every connection that lost
//! bytes (the connection timed out); connections that lost nothing go on either way.
//!
//! Every thread polls with a short timeout, so dropping the proxy stops it within a fraction of a
//! second. Only loopback addresses are used.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

/// How often a pump or the accept loop looks at the switch and the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Bytes a pump keeps while swallowing, to deliver on healing; past it the connection is reset
/// at healing whatever the heal says.
const HELD_LIMIT: usize = 16 << 20;
/// How long a write to a peer that does not read may block.
const WRITE_PATIENCE: Duration = Duration::from_secs(10);

const SWALLOW: u8 = 1;
const HEAL_DELIVER: u8 = 2;
const HEAL_RESET: u8 = 3;

/// How a black hole heals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heal {
    /// The swallowed bytes are delivered, late.
    Deliver,
    /// The connections that lost bytes are closed.
    Reset,
}

/// The black-hole switch of one host's proxies.
#[derive(Debug, Default)]
pub struct Switch {
    /// 0 (passing bytes, the start), `SWALLOW`, or the last heal (`HEAL_*`, which pass bytes
    /// too).
    state: AtomicU8,
}

impl Switch {
    /// Start swallowing every byte.
    pub fn blackhole(&self) {
        self.state.store(SWALLOW, Ordering::SeqCst);
    }

    /// Stop swallowing; the held bytes go as `heal` says.
    pub fn heal(&self, heal: Heal) {
        let state = match heal {
            Heal::Deliver => HEAL_DELIVER,
            Heal::Reset => HEAL_RESET,
        };
        self.state.store(state, Ordering::SeqCst);
    }

    fn swallowing(&self) -> bool {
        self.state.load(Ordering::SeqCst) == SWALLOW
    }

    fn resets(&self) -> bool {
        self.state.load(Ordering::SeqCst) == HEAL_RESET
    }
}

/// A running proxy to one target; dropped, it stops and closes every connection.
pub struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listen on a free loopback port and pipe each connection to `target` through `switch`.
    pub fn start(target: SocketAddr, switch: Arc<Switch>) -> anyhow::Result<Proxy> {
        anyhow::ensure!(
            target.ip().is_loopback(),
            "the proxy only reaches loopback addresses"
        );
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the proxy")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stop, threads) = (Arc::clone(&stop), Arc::clone(&threads));
            std::thread::Builder::new()
                .name(format!("proxy-{port}"))
                .spawn(move || accept_loop(&listener, target, &switch, &stop, &threads))
                .context("starting the proxy")?
        };
        Ok(Proxy {
            port,
            stop,
            threads,
            accept: Some(accept),
        })
    }

    /// The loopback port the host connects to.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let pumps =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for pump in pumps {
            let _ = pump.join();
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    target: SocketAddr,
    switch: &Arc<Switch>,
    stop: &Arc<AtomicBool>,
    threads: &Mutex<Vec<JoinHandle<()>>>,
) {
    while !stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(_) => continue,
        };
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
            // The node is down: the host sees its connection refused, as it would directly.
            drop(client);
            continue;
        };
        // A peer that stops reading (a paused host) cannot hold a pump, and so the proxy's
        // stop, forever: past this, the connection is closed as a timed-out one would be.
        let _ = client.set_write_timeout(Some(WRITE_PATIENCE));
        let _ = server.set_write_timeout(Some(WRITE_PATIENCE));
        let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
            continue;
        };
        let mut handles = threads.lock().unwrap_or_else(PoisonError::into_inner);
        handles.retain(|h| !h.is_finished());
        for (from, to) in [(client_in, server), (server_in, client)] {
            let (switch, stop) = (Arc::clone(switch), Arc::clone(stop));
            if let Ok(h) = std::thread::Builder::new()
                .name("proxy-pump".into())
                .spawn(move || pump(from, to, &switch, &stop))
            {
                handles.push(h);
            }
        }
    }
}

/// Copy `from` to `to` until either closes or the proxy stops, swallowing while the switch says
/// so (see the module docs).
fn pump(mut from: TcpStream, mut to: TcpStream, switch: &Switch, stop: &AtomicBool) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 << 10];
    let mut held: Vec<u8> = Vec::new();
    let mut lost = false;
    let close = |from: &TcpStream, to: &TcpStream| {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    };
    while !stop.load(Ordering::SeqCst) {
        if !switch.swallowing() && lost {
            if switch.resets() || held.len() > HELD_LIMIT {
                close(&from, &to);
                return;
            }
            if to.write_all(&held).is_err() {
                close(&from, &to);
                return;
            }
            held.clear();
            lost = false;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => {
                if !lost {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                // The peer is done, but what it sent is still swallowed: keep it until healing.
                std::thread::sleep(POLL);
                continue;
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => {
                close(&from, &to);
                return;
            }
        };
        if switch.swallowing() || lost {
            lost = true;
            if held.len() <= HELD_LIMIT {
                held.extend_from_slice(&buf[..n]);
            }
        } else if to.write_all(&buf[..n]).is_err() {
            close(&from, &to);
            return;
        }
    }
    close(&from, &to);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An echo server on loopback, for one connection.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        addr
    }

    fn exchange(s: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(text)?;
        let mut got = vec![0u8; text.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn a_black_hole_swallows_without_closing_and_delivers_late_when_healed_so() {
        let switch = Arc::new(Switch::default());
        let proxy = Proxy::start(echo(), Arc::clone(&switch)).expect("proxy");
        let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).expect("connect");
        assert_eq!(exchange(&mut s, b"one").expect("through"), b"one");
        switch.blackhole();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let started = Instant::now();
        let swallowed = exchange(&mut s, b"two").expect_err("swallowed");
        assert!(
            matches!(
                swallowed.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut
            ),
            "the connection stays open, silent: {swallowed}"
        );
        assert!(started.elapsed() >= Duration::from_millis(250));
        switch.heal(Heal::Deliver);
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut late = [0u8; 3];
        s.read_exact(&mut late).expect("delivered late");
        assert_eq!(&late, b"two");
        assert_eq!(exchange(&mut s, b"three").expect("healed"), b"three");
    }

    #[test]
    fn a_reset_heal_closes_the_connections_that_lost_bytes() {
        let switch = Arc::new(Switch::default());
        let proxy = Proxy::start(echo(), Arc::clone(&switch)).expect("proxy");
        let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).expect("connect");
        switch.blackhole();
        s.write_all(b"lost").expect("write");
        std::thread::sleep(Duration::from_millis(200));
        switch.heal(Heal::Reset);
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = [0u8; 4];
        let read = s.read(&mut buf);
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "closed, nothing delivered: {read:?}"
        );
    }
}
