"""Episode inspector: the recording, the self-contained page, and the page in a real browser
(headless Chromium driven by Playwright), plus `ppage-jax render --out x.html` and the run
directory's episode.html."""

import base64
import json
import re
import shutil
from pathlib import Path

import imageio.v3 as iio
import jax
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.cli.main import main
from ppage_jax.policies import combine_policies, greedy_chase, random_policy
from ppage_jax.viz.frames import COLOURS, render_episode, rollout_states, write_gif
from ppage_jax.viz.inspector import (
    EpisodeRecord,
    record_episode,
    write_episode_html,
    write_record_html,
)
from ppage_jax.viz.run_gif import write_run_gif

MAX_STEPS = 30
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def env():
    # 6x6, 2 chasing predators vs 2 random prey; the episode ends at the second capture.
    return pj.make(
        None,
        {
            "env.size": 6,
            "env.obstacle_percentage": 10.0,
            "agents.predators.count": 2,
            "agents.preys.count": 2,
            "agents.preys.speed": 1,
            "env.termination.capture_threshold": 2,
        },
    )


@pytest.fixture(scope="module")
def policy(env):
    return combine_policies(env, greedy_chase(env), random_policy(env))


@pytest.fixture(scope="module")
def page(env, policy, tmp_path_factory):
    """(path, record) of one recorded episode's page."""
    path = tmp_path_factory.mktemp("inspector") / "episode.html"
    record = write_episode_html(
        path,
        env,
        jax.random.PRNGKey(0),
        policy,
        max_steps=MAX_STEPS,
        title="test <episode>",
        fps=16.0,
    )
    return path, record


def page_data(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    match = re.search(
        r'<script type="application/json" id="episode-data">(.*?)</script>', text, re.S
    )
    return json.loads(match.group(1))


@pytest.mark.slow  # plays and renders twice
def test_record_is_the_gif_episode_with_the_step_info(env, policy, page):
    _, record = page
    assert record.end == "terminated" and record.turns == 8  # captured before MAX_STEPS
    assert record.term_names == env.reward_terms == ("base", "predator_distance", "survival")
    np.testing.assert_array_equal(record.weights, [1.0, 0.5, 1.0])
    # the same keys as render_episode: the page shows the GIF's episode
    states, dones = jax.jit(lambda k: rollout_states(env, k, policy, max_steps=MAX_STEPS))(
        jax.random.PRNGKey(0)
    )
    assert int(np.argmax(np.asarray(dones))) == record.turns
    np.testing.assert_array_equal(
        record.positions, np.asarray(states.positions)[: record.turns + 1]
    )
    np.testing.assert_array_equal(record.captured, np.asarray(states.captured)[: record.turns + 1])
    assert record.captured[-1, 2:].all() and not record.captured[0].any()
    # reward terms are info["reward_terms"] of each turn, replayed with env.step
    key = jax.random.PRNGKey(0)  # play_episodes' keys: fold_in(key, turn)

    @jax.jit
    def turn(k, obs, state):
        k_act, k_step = jax.random.split(k)
        return env.step(k_step, state, policy(k_act, obs, state))

    obs, state = env.reset(jax.random.fold_in(key, 0))
    for t in range(record.turns):
        obs, state, reward, _, _, info = turn(jax.random.fold_in(key, t + 1), obs, state)
        np.testing.assert_array_equal(record.reward_terms[t], np.asarray(info["reward_terms"]))
        np.testing.assert_allclose(record.reward_terms[t].sum(-1), reward, rtol=1e-6)


def test_page_is_self_contained_and_holds_the_record(page):
    path, record = page
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"https?://|<link|\bsrc=|@import|fetch\(|XMLHttpRequest", text)
    assert "<title>test &lt;episode&gt;</title>" in text
    data = page_data(path)
    assert data["title"] == "test <episode>" and data["end"] == "terminated"
    assert data["agents"] == ["predator_1", "predator_2", "prey_1", "prey_2"]
    np.testing.assert_array_equal(data["positions"], record.positions)
    np.testing.assert_array_equal(np.asarray(data["captured"], bool), record.captured)
    np.testing.assert_array_equal(np.asarray(data["rewards"], np.float32), record.reward_terms)
    assert data["colours"]["predator"] == "rgb(210,40,40)"


def test_records_built_from_arrays_are_checked(tmp_path):
    good = dict(
        size=2,
        agent_names=("predator_1", "prey_1"),
        is_predator=np.array([1, 0], bool),
        term_names=("base",),
        obstacle_map=np.zeros((2, 2), bool),
        positions=np.zeros((3, 2, 2), int),
        captured=np.zeros((3, 2), bool),
        reward_terms=np.array([[[1.0], [np.nan]], [[0.5], [-1.0]]], np.float32),
    )
    path = write_record_html(tmp_path / "a" / "b.html", EpisodeRecord(**good))
    assert page_data(path)["rewards"] == [[[1.0], [None]], [[0.5], [-1.0]]]  # NaN -> null
    with pytest.raises(ValueError, match=r"EpisodeRecord.positions has shape \(2, 2, 2\)"):
        EpisodeRecord(**{**good, "positions": np.zeros((2, 2, 2), int)})
    with pytest.raises(ValueError, match="EpisodeRecord.end is 'done'; allowed"):
        EpisodeRecord(**good, end="done")
    with pytest.raises(ValueError, match="fps is 0"):
        write_record_html(tmp_path / "c.html", EpisodeRecord(**good), fps=0)


# ------------------------------------------------------------------ in a real browser
def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    if chromium_path() is None:
        pytest.skip("no Chromium binary on PATH (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
    )
    playwright = sync_api.sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture(scope="module")
def opened(browser, page):
    """The page opened once: (playwright page, console errors, requested URLs, record)."""
    path, record = page
    tab = browser.new_page(viewport={"width": 1300, "height": 900})
    errors, requests = [], []
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda err: errors.append(str(err)))
    tab.on("request", lambda request: requests.append(request.url))
    tab.goto(path.as_uri())
    yield tab, errors, requests, record
    tab.close()


def go_to(tab, step: int) -> None:
    tab.fill("#step", str(step))
    assert tab.eval_on_selector("#step", "e => e.value") == str(step)


def test_page_loads_without_errors_or_network(opened, page):
    tab, errors, requests, record = opened
    assert errors == []
    assert requests == [page[0].as_uri()]
    assert tab.eval_on_selector("#step", "e => e.max") == str(record.turns)
    assert tab.locator(".agent").count() == 4
    assert "step 0 / " in tab.inner_text("#status")


def board_pixels(tab) -> np.ndarray:
    """The grid canvas as drawn (its PNG export; device pixel ratio 1)."""
    url = tab.eval_on_selector("#board", "c => c.toDataURL('image/png')")
    return iio.imread(base64.b64decode(url.split(",", 1)[1]))[..., :3]


def test_moving_the_slider_redraws_the_grid(opened):
    tab, errors, _, record = opened
    cell = int(tab.eval_on_selector("#board", "e => e.dataset.cellPx"))
    frames = {}
    for step in (0, record.turns):
        go_to(tab, step)
        frames[step] = board_pixels(tab)
    assert frames[0].shape == (6 * cell + 1, 6 * cell + 1, 3)
    assert (frames[0] != frames[record.turns]).any(axis=-1).sum() > cell * cell
    # every agent alone in its cell is drawn in its colour at the cell's centre
    for step, image in frames.items():
        positions, captured = record.positions[step], record.captured[step]
        for a, (x, y) in enumerate(positions):
            if (positions == (x, y)).all(axis=1).sum() > 1:
                continue
            kind = "predator" if a < 2 else "captured_prey" if captured[a] else "prey"
            centre = image[y * cell + cell // 2 - cell // 4, x * cell + cell // 2]
            np.testing.assert_allclose(centre, COLOURS[kind], atol=3)
        for x, y in np.argwhere(record.obstacle_map)[:, ::-1]:
            np.testing.assert_array_equal(image[y * cell + 3, x * cell + 3], COLOURS["obstacle"])
    assert errors == []


def test_values_shown_equal_the_recorded_ones(opened):
    tab, errors, _, record = opened
    step = record.turns  # the last turn: a capture, so base rewards are non-zero
    go_to(tab, step)
    cells = tab.eval_on_selector_all(
        "td.value",
        "tds => tds.map(td => [td.dataset.agent, td.dataset.term, td.dataset.kind,"
        " td.dataset.value, td.textContent])",
    )
    shown = {(agent, term, kind): (value, text) for agent, term, kind, value, text in cells}
    assert len(shown) == 4 * 4 * 2  # agents x (terms + total) x (this turn, return)
    returns = record.reward_terms[:step].astype(np.float64).sum(axis=0)
    for a, agent in enumerate(("predator_1", "predator_2", "prey_1", "prey_2")):
        for k, term in enumerate(record.term_names):
            value, text = shown[agent, term, "step"]
            assert np.float32(value) == record.reward_terms[step - 1, a, k]
            assert text == f"{record.reward_terms[step - 1, a, k]:.3f}"
            assert float(shown[agent, term, "return"][0]) == pytest.approx(returns[a, k], abs=1e-5)
        assert float(shown[agent, "total", "step"][0]) == pytest.approx(
            record.reward_terms[step - 1, a].sum(), abs=1e-5
        )
    assert (record.reward_terms[step - 1, :2, 0] > 0).any()  # a predator paid for the capture
    # the capture is marked: status line and the captured prey's badge
    newly = record.captured[-1] & ~record.captured[-2]
    captured_now = [name for name, new in zip(record.agent_names, newly, strict=True) if new]
    assert f"captured now: {', '.join(captured_now)}" in tab.inner_text("#status")
    badge = tab.locator(f'.agent[data-agent="{captured_now[0]}"] .badge')
    assert badge.is_visible() and badge.inner_text() == f"captured at turn {step}"
    go_to(tab, 0)
    assert tab.locator(f'.agent[data-agent="{captured_now[0]}"] .badge').is_hidden()
    assert (
        shown
        and tab.eval_on_selector('td.value[data-kind="step"]', "e => e.textContent") == "\u2014"
    )  # no reward before the first turn
    assert errors == []


def test_play_advances_and_pause_stops(opened):
    tab, errors, _, record = opened
    go_to(tab, 0)
    tab.click("#play")
    tab.wait_for_function("Number(document.getElementById('step').value) >= 2", timeout=5000)
    tab.click("#play")
    tab.wait_for_function("document.getElementById('play').textContent === 'Play'", timeout=5000)
    stopped = tab.eval_on_selector("#step", "e => e.value")  # read once the pause took effect
    tab.wait_for_timeout(300)  # 16 steps/s: would have moved on if still playing
    assert tab.eval_on_selector("#step", "e => e.value") == stopped
    assert tab.inner_text("#play") == "Play" and errors == []


# ------------------------------------------------------------------ command line and runs
@pytest.mark.slow  # renders an episode
def test_render_writes_html_by_suffix(tmp_path, capsys):
    out = tmp_path / "ep.html"
    small = ["--set", "env.size=6", "--set", "env.obstacle_percentage=10.0"]
    assert (
        main(
            [
                "render",
                "configs/default",
                *small,
                "--out",
                str(out),
                "--max-steps",
                "5",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    assert (
        f"wrote {out}: inspector page, 5 turns (random actions, seed 3)" in capsys.readouterr().out
    )
    data = page_data(out)
    assert data["end"] == "cut" and len(data["rewards"]) == 5 and len(data["positions"]) == 6
    env = pj.make("configs/default", {"env.size": 6, "env.obstacle_percentage": 10.0})
    record = record_episode(env, jax.random.PRNGKey(3), max_steps=5)  # the seed's episode
    np.testing.assert_array_equal(data["positions"], record.positions)


@pytest.mark.slow  # a run, then its pages
def test_run_directory_gets_the_gif_episode_as_html(env, policy, tmp_path):
    """episode.html and episode.gif of a run directory show the same episode of any policy."""
    run_dir = tmp_path / "my-run"
    run_dir.mkdir()
    from ppage_jax.viz.run_pictures import write_run_pictures

    _, path = write_run_pictures(run_dir, env, policy, seed=5, max_steps=MAX_STEPS, label="chase")
    assert path == run_dir / "episode.html"
    data = page_data(path)
    assert data["title"] == "my-run: chase, layout seed 5"
    assert data["end"] == "terminated"
    states, _ = rollout_states(env, jax.random.PRNGKey(5), policy, max_steps=MAX_STEPS)
    positions = np.asarray(data["positions"])
    np.testing.assert_array_equal(positions, np.asarray(states.positions)[: len(positions)])
    gif = write_run_gif(run_dir, env, policy, seed=5, max_steps=MAX_STEPS, cell_px=8)
    assert gif == run_dir / "episode.gif"
    frames = render_episode(env, jax.random.PRNGKey(5), policy, max_steps=MAX_STEPS, cell_px=8)
    assert len(frames) == len(positions)  # the reset state, then every turn to the end
    write_gif(tmp_path / "same.gif", frames)
    np.testing.assert_array_equal(
        iio.imread(gif, index=None), iio.imread(tmp_path / "same.gif", index=None)
    )


@pytest.mark.slow  # compiles the pictures' program and both separate ones
def test_the_run_pictures_from_one_recording_are_the_separate_writers_bytes(env, policy, tmp_path):
    """``ppage-jax run``'s pictures come from one program that records and draws the
    episode once: the same bytes as the GIF and the page of that key written apart."""
    from ppage_jax.viz.run_pictures import write_run_pictures

    apart, together = tmp_path / "my-run", tmp_path / "one" / "my-run"
    apart.mkdir()
    together.mkdir(parents=True)
    label = "chase: seed 0"
    write_run_gif(apart, env, policy, seed=5, max_steps=MAX_STEPS, caption=label)
    title = f"my-run: {label}, layout seed 5"
    key = jax.random.PRNGKey(5)
    write_episode_html(apart / "episode.html", env, key, policy, None, MAX_STEPS, title)
    gif, html = write_run_pictures(together, env, policy, seed=5, max_steps=MAX_STEPS, label=label)
    assert (gif.name, html.name) == ("episode.gif", "episode.html")
    assert gif.read_bytes() == (apart / "episode.gif").read_bytes()
    assert html.read_bytes() == (apart / "episode.html").read_bytes()
    short = tmp_path / "short"
    short.mkdir()
    write_run_pictures(short, env, policy, seed=5, max_steps=3, label=label)  # cut, not ended
    assert page_data(short / "episode.html")["end"] == "cut"
    assert len(iio.imread(short / "episode.gif", index=None)) == 4
