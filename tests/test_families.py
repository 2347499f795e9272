"""The registry: every family walks through build, one training step, inference, its picture and
its cost through the same code the lab uses, and the house keeps its floors."""
import ast
from dataclasses import fields
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

import envs
from glimpse.commands import train
from envs.engine import fixed_canvas_set
from envs.task import TASKS
from envs.coords import unit_to_pixels
from glimpse.checkpoint import load_checkpoint, load_model, save_checkpoint
from glimpse.inference import predict_probabilities
from glimpse.costs import flops_per_image, pixels_read
from glimpse.gradient_noise import attention_parameters
from glimpse.models import get_family, list_families
from glimpse.models.registry import Attention, canvases_to_tensor
from glimpse.training.config import PRESETS, REMOVED_OPTIONS, TrainConfig, family_options, resolve_config
from glimpse.training.learner import pictures
from glimpse.training.loop import make_learner
from glimpse.viz import where_it_looks

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = [f.name for f in list_families()]


@pytest.fixture(scope="module")
def canvases(request):
    from envs.data import load_bundled_subset

    data = load_bundled_subset()
    return data, fixed_canvas_set(data.test.images[:6], data.test.labels[:6], 60, 4, False, 0)


def test_pictures_show_the_first_glimpses_validation_scored(canvases, monkeypatch):
    """With random first glimpses, validation draws them once for its whole set; the pictures of the
    set's first canvases must show those, not draws of their own."""
    from glimpse.finding import attention_centres
    from glimpse.training import learner as learner_module

    data, test = canvases
    config = resolve_config({"preset": "cluttered60", "first_location": "random", "batch_size": 8, "data_dir": "bundled"})
    torch.manual_seed(0)
    learner = make_learner(config, data)
    drawn_with, real = {}, learner_module.where_it_looks

    def where_it_looks(*args, draws=None, **kwargs):
        drawn_with["draws"] = draws
        return real(*args, draws=draws, **kwargs)

    monkeypatch.setattr(learner_module, "where_it_looks", where_it_looks)
    pictures(learner, test.images[:2], test.labels[:2], set_size=len(test.images))
    pictured = learner.family.run(learner.model, test.images[:2], learner.task, draws=drawn_with["draws"])
    validated, _ = attention_centres(learner.family.name, learner.model, learner.task, test.images)
    np.testing.assert_allclose(unit_to_pixels(pictured.attention.centres[:, 0].cpu(), 60).numpy(), validated[:2, 0],
                               atol=1e-5)
    assert not np.allclose(validated[:2, 0], validated[2:4, 0])  # random, not the centre


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_builds_trains_predicts_draws_and_costs(name, canvases):
    data, test = canvases
    family = get_family(name)
    config = resolve_config({"preset": "cluttered60", **family_options(family), "batch_size": 8,
                             "data_dir": "bundled"})
    assert config.family is family and config.arch == name
    torch.manual_seed(0)
    learner = make_learner(config, data)
    assert learner.family is family and learner.task == config.task()

    # one training step moves the weights
    before = [p.detach().clone() for p in learner.model.parameters()]
    loss, metrics = learner.loss(np.arange(8), step_seed=0)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert all(k.startswith(("losses/", "train/")) for k in metrics)
    loss.backward()
    # what DistributedDataParallel is told: a family that leaves no parameter unused gives each a gradient
    if not family.leaves_parameters_unused(config):
        unused = [n for n, p in learner.model.named_parameters() if p.grad is None]
        assert not unused, f"{name}: no gradient reaches {unused}: declare it in leaves_parameters_unused"
    torch.optim.Adam(learner.model.parameters(), lr=1e-3).step()
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.model.parameters()))

    # inference: probabilities for every canvas, the same whatever the batch size
    probs = predict_probabilities(name, learner.model, learner.task, test.images, batch_size=4)
    assert probs.shape == (6, 10)
    torch.testing.assert_close(probs.sum(-1), torch.ones(6))
    torch.testing.assert_close(probs, predict_probabilities(name, learner.model, learner.task, test.images, 6))

    # where it looks, in the common form, and its picture (TensorBoard and the report draw the same)
    look = family.run(learner.model, test.images, learner.task, record=True)
    drawn = pictures(learner, test.images, test.labels)
    if family.has_attention:
        attention = look.attention
        assert isinstance(attention, Attention) and attention.centres.shape[0] == 6
        assert attention.centres.shape[-1] == 2 and attention.centres.abs().max() <= 1
        assert (attention.boxes is not None) or (attention.maps is not None)
        # only a hard model reads whole pixels (envs.retina); the differentiable retina's boxes fall between them
        assert attention.snap_to_retina == (family.mode == "hard") and attention[:2].cpu().snap_to_retina == \
            attention.snap_to_retina
        one = where_it_looks(family, learner.model, learner.task, test.images[:2], test.labels[:2])
        assert len(one) == 2 and one[0].dtype == np.uint8 and one[0].shape[0] == 3
        assert list(drawn) == ["attention/where_it_looks"] and drawn["attention/where_it_looks"].shape[0] == 3
        if family.learns_where_to_look:
            assert sum(p.numel() for p in attention_parameters(learner.model, name).values()) > 0
            assert family.attention_module_text, f"{name}: say in attention_module_text what those parameters are"
    else:
        assert look.attention is None and drawn == {}
        with pytest.raises(ValueError, match="no attention"):
            attention_parameters(learner.model, name)

    # a state -> attention -> state loop: its gradient per step, one name per raw attention parameter
    if family.state_loop is not None:
        norms = family.state_gradient_norms(learner.model, canvases_to_tensor(test.images[:2]),
                                            torch.as_tensor(test.labels[:2]).long())
        assert norms["attention"].shape[-1] == len(family.state_loop_parameters) > 0, \
            f"{name}: name each raw attention parameter in state_loop_parameters"

    # its cost
    cost = pixels_read(name, learner.task, learner.model_config)
    assert set(cost) == {"sensor_values", "canvas_pixels_touched", "input_pixels"}
    assert cost["input_pixels"] == 3600 and all(v > 0 for v in cost.values())
    assert flops_per_image(name, learner.model, learner.task, batch=2) > 0


def test_registry_lists_each_family_once_and_names_the_unknown():
    assert len(FAMILIES) == len(set(FAMILIES)) and {"ram", "dram", "draw", "sat", "stn", "cnn", "fc"} <= set(FAMILIES)
    assert {"ram", "dram"} <= {f.name for f in list_families("hard")}
    with pytest.raises(ValueError, match="unknown family 'vit'"):
        get_family("vit")


def test_a_family_declares_its_own_options_their_ranges_and_their_help_group(monkeypatch):
    from glimpse.models import registry
    from glimpse.training.config import build_parser

    draw = get_family("draw")
    assert "read_size" in draw.own_options and "read_size" in {f.name for f in fields(TrainConfig)}
    with pytest.raises(ValueError, match="--read-size must be >= 1, got 0"):
        resolve_config({"mode": "soft", "arch": "draw", "read_size": 0})
    with pytest.raises(ValueError, match="--reinforce-samples must be at most 64"):
        resolve_config({"mode": "hard", "arch": "dram", "reinforce_samples": 65})
    groups = {g.title: [a.dest for a in g._group_actions] for g in build_parser()._action_groups}
    # each option is listed under the families that read it, whichever class declares it
    assert groups["draw options"] + groups["draw, ram-diff options"] == list(draw.own_options)
    assert groups["draw, ram-diff options"] == ["attention_into_core"]
    assert "location_std" in groups["ram, dram, ram-diff options"] and "core" in groups["ram, ram-diff options"]
    assert "reinforce_samples" in groups["ram, dram options"] and "random_glimpses" in groups["ram options"]
    # two classes may not declare one option
    twin = type("TwinFamily", (type(draw),), {"name": "twin", "own_options": {"read_size": draw.own_options["read_size"]}})
    monkeypatch.setitem(registry._REGISTRY, "twin", twin())
    with pytest.raises(ValueError, match="both declare the option 'read_size'"):
        registry.declared_options()


def test_the_docs_list_the_families_the_registry_has(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "scripts" / "docs_tables.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([]) == 0, capsys.readouterr().out  # docs/training.md's block is the registry's table
    for family in list_families():
        assert f"| `{family.name}`" in (ROOT / "docs" / "training.md").read_text()


def test_each_mode_has_one_default_family_and_a_second_is_refused():
    from glimpse.models import default_family
    from glimpse.models.registry import register

    for mode in ("hard", "soft", "full"):
        assert sum(f.default_for_mode for f in list_families(mode)) == 1
        assert resolve_config({"mode": mode}).family is default_family(mode)
    hard = default_family("hard")
    rival = type("RivalFamily", (type(hard),), {"name": "rival"})  # inherits default_for_mode = True
    with pytest.raises(ValueError, match="both declare themselves the default of --mode hard"):
        register(rival)
    assert "rival" not in [f.name for f in list_families()]


def test_a_family_that_draws_a_fixed_box_asks_for_no_attention_gradient(monkeypatch):
    """A family may draw where it looks yet learn nothing about it (a fixed crop): it says so once,
    and the report then measures no attention gradient for it; an unknown --arch names the
    registered families and where a new one is registered."""
    from glimpse.models import registry
    from glimpse.report.experiments import family_experiments

    fixed = type("FixedCropFamily", (type(get_family("stn")),), {"name": "fixed-crop", "learns_where_to_look": False})
    monkeypatch.setitem(registry._REGISTRY, "fixed-crop", fixed())
    assert [e.learns_attention for e in family_experiments(get_family("fixed-crop"))] == [False]
    assert all(e.learns_attention for e in family_experiments(get_family("stn")))
    assert resolve_config({"arch": "fixed-crop"}).mode == "soft"  # the Python API names the mode as --arch does
    with pytest.raises(ValueError, match="there is no family 'centre-crop' .*registered: ram, .*glimpse/models/__init__.py"):
        resolve_config({"arch": "centre-crop"})


def _lab_files():
    """Every Python file of the lab outside glimpse/models/ and tests/: the library, the
    environments, the command lines, scripts and benchmarks."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in ("tests", ".venv", "build") or parts[:2] == ("glimpse", "models") or "site-packages" in parts:
            continue
        yield path


def _family_modules() -> set[str]:
    """Each family's own module: the module that registers it, or its folder when it has one."""
    modules = set()
    for family in list_families():
        module = type(family).__module__
        modules.add(module.rsplit(".", 1)[0] if module.endswith(".family") else module)
    return modules


def _branches_on_a_family(paths) -> list[str]:
    """Where the files compare with or pass a family's name as a string, or import a family's own module."""
    own = _family_modules()
    offenders = []
    for path in paths:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        where = lambda node: f"{shown}:{node.lineno}"  # noqa: E731
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                names = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                names += [e.value for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set))
                          for e in c.elts if isinstance(e, ast.Constant)]
                if set(names) & set(FAMILIES):
                    offenders.append(f"{where(node)} compares with a family's name")
            elif isinstance(node, ast.Call):
                values = [*node.args, *(k.value for k in node.keywords)]
                if any(isinstance(v, ast.Constant) and v.value in FAMILIES for v in values):
                    offenders.append(f"{where(node)} passes a family's name")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                if any(m == o or m.startswith(o + ".") for m in modules for o in own):
                    offenders.append(f"{where(node)} imports a family's own module")
    return offenders


def test_a_family_needs_no_branch_outside_its_module():
    """Outside glimpse/models/ and tests/ (scripts and benchmarks included), no code compares
    with or passes a family's name as a string, and none imports a family's own module: they
    ask the registry, and the family answers through its methods and capabilities."""
    own = _family_modules()
    assert "glimpse.models.ram" in own and "glimpse.models.dram" in own and "glimpse.models.draw" in own
    offenders = _branches_on_a_family(_lab_files())
    assert not offenders, offenders


def test_the_guard_above_can_fail(tmp_path):
    """The three things the guard looks for, in a file it reads, are each caught (the probe is
    written outside the clone, so that a parallel run of the guard never reads it)."""
    probe = tmp_path / "_guard_probe.py"
    probe.write_text('from glimpse.models.dram import DRAMConfig\nif kind == "ram":\n    get_family("sat")\n')
    text = "\n".join(_branches_on_a_family([*_lab_files(), probe]))
    assert all(f"_guard_probe.py:{line}" in text for line in (1, 2, 3)), text


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_imports_flow_one_way():
    """envs/ imports nothing from glimpse; models import no training, evaluation or report code;
    and no two modules import each other, directly or round a longer circle."""
    modules = {_module(p): _imports(p) for d in ("envs", "glimpse") for p in (ROOT / d).rglob("*.py")}
    for name, imported in modules.items():
        if name.startswith("envs"):
            assert not {i for i in imported if i.split(".")[0] == "glimpse"}, name
        if name.startswith("glimpse.models"):
            above = {i for i in imported if i.startswith("glimpse.") and not i.startswith(("glimpse.models", "glimpse.viz"))}
            assert not above, (name, above)

    def edges(name):  # the modules of the lab that ``name`` imports by name
        return {i for i in modules[name] if i in modules} - {name}

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in edges(node):
                if nxt == start:
                    return path
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return None

    circles = [c for c in (cycle_from(m) for m in modules) if c]
    assert not circles, circles


def test_env_ids_and_presets_read_one_table_of_tasks():
    assert PRESETS is TASKS
    for env_id, name in envs.ENV_IDS.items():
        assert gymnasium.spec(env_id).kwargs == TASKS[name]
    for name, task in TASKS.items():
        config = resolve_config({"preset": name})
        assert {k: getattr(config, k) for k in task} == task
        assert envs.GlimpseTask(**task).first_location == config.first_location  # the defaults agree


def test_a_family_states_its_own_task_overrides():
    assert resolve_config({"mode": "soft", "arch": "sat", "preset": "cluttered60"}).n_glimpses == 4
    assert resolve_config({"mode": "soft", "arch": "stn", "preset": "cluttered100"}).n_glimpses == 1
    assert resolve_config({"mode": "soft", "arch": "draw", "preset": "cluttered60"}).n_glimpses == 6


def test_hyperparameter_table_lists_only_what_applies():
    draw = resolve_config({"mode": "soft", "arch": "draw"}).applicable()
    assert "read_size" in draw and "core" not in draw and "full_arch" not in draw and "attention_weight" not in draw
    assert draw["arch"] == "draw"
    ram = resolve_config({"mode": "hard"}).applicable()
    assert "core" in ram and "read_size" not in ram and "soft_arch" not in ram and ram["arch"] == "ram"
    dram = resolve_config({"mode": "hard", "arch": "dram"}).applicable()
    assert "context_size" in dram and "core" not in dram and "random_glimpses" not in dram


def test_arch_picks_the_family_within_its_mode_and_the_old_flags_still_work(capsys):
    assert resolve_config({"mode": "soft", "soft_arch": "stn"}).arch == "stn"  # the old spelling
    assert resolve_config({"mode": "full", "full_arch": "fc"}).family is get_family("fc")
    with pytest.raises(ValueError, match="disagree"):
        resolve_config({"mode": "soft", "arch": "draw", "soft_arch": "stn"})
    with pytest.raises(ValueError, match="dram is a family of --mode hard"):
        resolve_config({"mode": "soft", "arch": "dram"})
    assert train.main(["--mode", "hard", "--soft-arch", "draw", "--data-dir", "bundled"]) == 2
    assert "old spelling of --arch for --mode soft" in capsys.readouterr().err
    # family names are unique, so --arch alone names its mode; a --mode given that disagrees is refused
    from glimpse.training.config import config_from_args
    for family in list_families():
        assert config_from_args(train.build_parser().parse_args(["--arch", family.name])).mode == family.mode
    with pytest.raises(ValueError, match="sat-max is a family of --mode full"):
        config_from_args(train.build_parser().parse_args(["--mode", "hard", "--arch", "sat-max"]))
    assert "replaced by --arch" in train.build_parser().format_help()
    # a checkpoint's flat train_config of before --arch (mode, soft_arch and full_arch) still loads
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "arch"}
    assert TrainConfig.from_dict({**old, "mode": "soft", "soft_arch": "draw", "full_arch": "cnn"}).arch == "draw"
    assert TrainConfig.from_dict({**old, "mode": "hard", "soft_arch": "sat", "full_arch": "cnn"}).arch == "ram"


def test_a_removed_option_loads_at_its_default_and_is_refused_otherwise(tmp_path, capsys):
    old = {**TrainConfig().to_dict(), **REMOVED_OPTIONS}
    assert TrainConfig.from_dict(old) == TrainConfig()
    with pytest.raises(ValueError, match="learn_std=True: an option this version no longer has"):
        TrainConfig.from_dict({**old, "learn_std": True})

    # a checkpoint whose model config holds a removed field: loads at the default, refused otherwise
    family = get_family("draw")
    model = family.build({"canvas_size": 60})
    payload = dict(kind="draw", model_config={**model.config.to_dict(), "sigma_units": "pixels", "min_sigma": 0.0},
                   task=resolve_config({"mode": "soft", "arch": "draw"}).task(), model_state=model.state_dict())
    save_checkpoint(tmp_path / "old.pt", payload)
    load_model(tmp_path / "old.pt")
    save_checkpoint(tmp_path / "stride.pt", {**payload, "model_config": {**payload["model_config"],
                                                                          "sigma_units": "stride"}})
    import evaluate

    assert evaluate.main(["--checkpoint", str(tmp_path / "stride.pt"), "--data-dir", "bundled"]) == 2
    assert "sigma_units='stride'" in capsys.readouterr().err

    # resuming a run whose options include a removed one at another value: refused, exit 2
    run = tmp_path / "run"
    last = {**payload, "train_config": {**TrainConfig().to_dict(), "optimizer": "sgd"}, "optimizer_state": {},
            "step": 1, "best_val_accuracy": 0.0, "best_step": 1, "run_dir": str(run)}
    save_checkpoint(run / "last.pt", last)
    assert train.main(["--resume", str(run)]) == 2
    assert "optimizer='sgd'" in capsys.readouterr().err
    assert load_checkpoint(run / "last.pt")["step"] == 1  # nothing was written


@pytest.mark.parametrize("family", list_families(), ids=lambda f: f.name)
def test_a_family_s_added_fields_are_fields_and_its_removed_ones_are_not(family):
    """``ADDED`` (fields a config gained, at the value older checkpoints behave as) names fields of the
    config, ``REMOVED`` (fields it dropped) none, and no name is in both: a slip there breaks every
    load of the family's checkpoints."""
    names = {f.name for f in fields(family.Config)}
    added, removed = getattr(family.Config, "ADDED", {}), getattr(family.Config, "REMOVED", {})
    assert set(added) <= names and not set(removed) & names and not set(added) & set(removed)
    default = family.config({})  # the defaults build; a checkpoint lacking an added field takes its old value
    for name, old in added.items():
        lacking = {k: v for k, v in vars(default).items() if k != name}
        assert getattr(family.config(lacking), name) == old
