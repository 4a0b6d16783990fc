"""Write ``bench/data/conversations.json``: multi-session user/assistant chats with labelled
evidence turns, for the conversational-retrieval part of the quality benchmark.

    python -m bench.make_conversations            # (re)write the data file
    python -m bench.make_conversations --check    # exit 1 if the committed file is not current

Why a generator: public chat-memory sets (LoCoMo, LongMemEval) cannot be downloaded here, and
a hand-typed set would be too small. Everything below is seeded (:data:`SEED`), so the file is
reproducible byte for byte and its tests can check that it is.

What it covers. 24 conversations (a personal-assistant, a coding-assistant or a mixed user
each; 8 to 10 dated sessions apiece; ~200 turns per conversation, 4,700 in all), most of them
ordinary assistant work (recipes, emails, trip advice, regexes, SQL, git, reviews) that
mentions the same people, pets and projects as the facts do. Into that, facts are woven as
turns; each of the 372 questions names its evidence turns by id:

* ``preference``: likes and habits (diet, seat on planes, editor, commit style, answer style).
* ``fact``: people, pets, home, work and projects (whose dog, which database, who leads what).
* ``temporal``: dated events (appointments, deadlines, trips; mentioned in a session before
  they happen) and which of two events comes first (two evidence turns).
* ``update``: a plan or fact stated, then changed in a later session; the evidence is both
  turns (the question asks for the current state).
* ``multi_hop``: the answer needs two turns of two sessions (a niece's city = who her mother
  is + where her mother lives).
* ``identifier``: rare names and identifiers (ticket keys, error codes, host names, package
  versions, unusual surnames, restaurants), where exact-term matching is what finds the turn;
  as in real chats the identifier also comes up in other, non-evidence turns.
* ``assistant``: the evidence is something the assistant said (a book it recommended).
* ``abstention``: nothing in the conversation answers the question (``evidence`` is empty).

Wording (each question's ``wording`` field): an identifier question repeats its identifier;
every other question is, at even odds, an ``overlap`` question, which reuses a salient word of
its evidence the way users do ("When is Mochi's vet appointment?"), or a ``paraphrase``, which
shares no content word with it ("When is the animal check-up?"). Neither copies the evidence
sentence: all-copies would hand the win to BM25, all-paraphrases to dense retrieval. (A first
draft of paraphrases only was run once and was as one-sided as copies would be: BM25 found
evidence for 0.44 of its questions, dense retrieval for 0.86. The 50/50 share was then set on
that principle and has not been adjusted to any result since.) The evaluation reports each
wording separately. No turn but a question's evidence contains the key term of its answer
(:func:`validate`, also run by the tests). The dialogues are templated: longer sentences
repeat across conversations and short acknowledgements within one, and real chats ramble more.

Never used for tuning: no threshold or weight in ``mimir_core`` was chosen with this set.
Its conversations are split into a ``tune`` and a ``test`` half (alternately, by id) so that
a baseline's one free parameter (the BM25/dense fusion weight) is chosen on the tune half;
figures and gates are reported on the test half.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "data" / "conversations.json"
SEED = 20240917
N_CONVERSATIONS = 24
#: Questions per category in one conversation (abstention added on top).
PLAN = {
    "preference": 2,
    "fact": 3,
    "temporal": 2,
    "update": 2,
    "multi_hop": 2,
    "identifier": 2,
    "assistant": 1,
}
PROFILES = ("personal", "coding", "mixed")

# -- pools ---------------------------------------------------------------------------------------

USERS = [
    "Maya", "Jonas", "Aisha", "Tomás", "Hannah", "Kenji", "Olivia", "Rafael", "Ines", "Dmitri",
    "Chloe", "Samuel", "Leila", "Marek", "Nora", "Ewan", "Ananya", "Felix", "Zara", "Mateo",
    "Freya", "Idris", "Clara", "Hugo",
]  # fmt: skip
PARTNERS = [
    ("wife", "Sofia", "she"), ("husband", "Ben", "he"), ("partner", "Alex", "they"),
    ("wife", "Priyanka", "she"), ("husband", "Luca", "he"), ("girlfriend", "Emma", "she"),
    ("boyfriend", "Daniel", "he"), ("wife", "Hana", "she"), ("husband", "Oliver", "he"),
    ("partner", "Sam", "they"), ("wife", "Marta", "she"), ("husband", "Yusuf", "he"),
]  # fmt: skip
SISTERS = ["Priya", "Lena", "Camille", "Rosa", "Aoife", "Ingrid", "Fatima", "Beatriz", "Mei",
           "Greta", "Nadia", "Elif"]  # fmt: skip
FRIENDS = ["Tom", "Jess", "Marco", "Ruth", "Kofi", "Lars", "Anika", "Diego", "Hiro", "Nell",
           "Pablo", "Sinéad", "Viktor", "Ada", "Omar", "Bea"]  # fmt: skip
KIDS = [("daughter", "Lily", "she"), ("son", "Noah", "he"), ("daughter", "Ava", "she"),
        ("son", "Leo", "he"), ("daughter", "Isla", "she"), ("son", "Finn", "he"),
        ("daughter", "Mila", "she"), ("son", "Arlo", "he")]  # fmt: skip
CITIES = ["Leeds", "Porto", "Lyon", "Tucson", "Kraków", "Ghent", "Valencia", "Halifax",
          "Dunedin", "Tartu", "Bergen", "Cork", "Bologna", "Malmö", "Graz", "Aarhus"]  # fmt: skip
PETS = [  # species, breed phrase, name, pronoun, the word of the phrase a user reuses
    ("dog", "a three-year-old greyhound", "Biscuit", "her", "greyhound"),
    ("dog", "a scruffy beagle mix", "Pickle", "him", "beagle"),
    ("cat", "a grey Maine Coon kitten", "Mochi", "him", "kitten"),
    ("cat", "a shy tortoiseshell", "Juniper", "her", "tortoiseshell"),
    ("dog", "an old whippet", "Waffles", "him", "whippet"),
    ("cat", "a one-eyed tabby", "Pepper", "her", "tabby"),
    ("rabbit", "a lop-eared bunny", "Noodle", "him", "bunny"),
    ("dog", "a border collie puppy", "Clementine", "her", "puppy"),
]  # fmt: skip
RARE_PEOPLE = [
    "Xiomara Quintanilla", "Thandiwe Mbeki-Ross", "Ieuan Pryce-Jenkins", "Oisín Kavanagh",
    "Bronisława Zielińska", "Tadhg Ó Ceallaigh", "Zbigniew Wróbel", "Ngozi Okonkwo",
    "Saoirse Ní Bhriain", "Radomir Vukašinović", "Eulalia Fenwick", "Kwabena Asante",
    "Siddharth Venkataraman", "Annelies Vandewalle", "Yevgenia Sholokhova", "Ferdinand Quaresma",
    "Ottoline Ashgrove", "Hrafnhildur Jónsdóttir", "Teodoro Balsamello", "Marguerite Delacroix",
]  # fmt: skip
TICKET_PREFIXES = ["LEDG", "OPS", "PAY", "MOB", "INFRA", "CORE", "DATA", "WEB", "SHIP", "AUTH"]
PROJECTS = ["ledgerline", "tidewatch", "quillmate", "ferrotrack", "brambleworks", "orbitalis",
            "kestrel-api", "saltmarsh", "lanternfish", "copperleaf", "wrenfield",
            "marlinspike"]  # fmt: skip
HOSTS = ["etl-worker-03", "bastion-fra-2", "pg-replica-b7", "gpu-box-kestrel", "jenkins-legacy-01",
         "redis-cache-euw4", "build-mac-mini-2", "sftp-partner-09"]  # fmt: skip
RESTAURANTS = [
    ("Taberna do Quintal", "grilled octopus"), ("Osteria Zanzibar", "pumpkin tortelli"),
    ("Koji & Lark", "miso-glazed aubergine"), ("Bar Brindisi", "saffron risotto"),
    ("Café Sołtys", "potato pierogi"), ("Mangal Dağı", "lamb adana kebab"),
    ("The Gilded Turnip", "beetroot wellington"), ("Chez Maëlle", "duck confit"),
]  # fmt: skip
COLLEAGUES = ["Oksana", "Dev", "Miriam", "Tobias", "Rhea", "Carlos", "Yuna", "Bartek", "Femi",
              "Agnes", "Piotr", "Salma"]  # fmt: skip
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def pretty(d: date) -> str:
    """``Friday 14 June``: how people write dates in chat."""
    return f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS[d.month - 1]}"


@dataclass
class Persona:
    """The user of one conversation: the people, pets and projects facts are about."""

    user: str
    partner: tuple[str, str, str]
    sister: str
    sister_city: str
    friends: list[str]
    kid: tuple[str, str, str]
    pet: tuple[str, str, str, str, str]
    city: str
    project: str
    colleagues: list[str]
    rare: list[str]
    start: date


@dataclass
class Step:
    """One exchange (a user turn and the assistant's reply) carrying a fact; ``evidence`` says
    which of the two turns holds it."""

    user: str
    assistant: str
    evidence: str = "user"


@dataclass
class Fact:
    """A question, the exchanges that answer it (in order: an update's second step comes in a
    later session), and the answer's key terms (no other turn may contain them)."""

    key: str
    category: str
    domain: str
    asked: tuple[str, str]
    """The question and its wording: ``overlap``, ``paraphrase`` or ``identifier``."""
    answer: str
    steps: list[Step]
    terms: list[str] = field(default_factory=list)
    ordered: bool = False
    before: date | None = None
    """The last day its turns can be said on (a dated event is mentioned before it)."""
    mentions: list[Step] = field(default_factory=list)
    """Other exchanges naming the same identifier without answering (real chats come back to a
    ticket or a host many times); never evidence, placed in other sessions."""


FRAMES: dict[str, list[tuple[str, str, Callable[[random.Random, Persona], Fact]]]] = {}


def frame(category: str, domain: str, group: str = "") -> Callable[[Any], Any]:
    """Register a fact generator. ``group``: frames that state the same thing about the persona
    (two would label one turn twice, or contradict each other), at most one per conversation."""

    def register(fn: Callable[[random.Random, Persona], Fact]) -> Any:
        FRAMES.setdefault(category, []).append((domain, group or fn.__name__, fn))
        return fn

    return register


def pick(rng: random.Random, options: list[Any]) -> Any:
    return options[rng.randrange(len(options))]


def ack(rng: random.Random) -> str:
    return pick(
        rng,
        [
            "Got it, I'll keep that in mind.",
            "Noted — thanks for telling me.",
            "Thanks, that's useful context.",
            "Understood. I'll factor that in from now on.",
            "Good to know, I'll remember that.",
            "Makes sense. I'll keep it in mind for later.",
        ],
    )


def ask(rng: random.Random, overlap: list[str], paraphrase: list[str]) -> tuple[str, str]:
    """A question worded with a salient word of its evidence (``overlap``: "When is Mochi's
    vet appointment?") or with none (``paraphrase``: "When is the animal check-up?"), one or
    the other at even odds: real users do both, and either alone would favour one retriever."""
    if rng.random() < 0.5:
        return pick(rng, overlap), "overlap"
    return pick(rng, paraphrase), "paraphrase"


# -- preference ----------------------------------------------------------------------------------


@frame("preference", "personal")
def diet(rng: random.Random, p: Persona) -> Fact:
    kind, said = pick(
        rng,
        [
            ("vegetarian", "I stopped eating meat and fish"),
            ("pescatarian", "I've cut out meat but still eat fish and seafood"),
            ("vegan", "I've dropped all animal products, meat, dairy and eggs included"),
        ],
    )
    when = pick(rng, ["back in January", "at the start of the year", "last autumn"])
    user = pick(
        rng,
        [
            f"Before you suggest any recipes: {said} {when}, mostly for climate reasons.",
            f"Small thing for meal ideas — {said} {when}, so please plan around that.",
        ],
    )
    asked = ask(
        rng,
        ["Do I eat meat these days?",
         "What should you remember about meat when you plan food for me?"],
        ["What eating restrictions should you respect when proposing dishes for me?",
         "Which kind of diet do I follow?"],
    )  # fmt: skip
    return Fact("diet", "preference", "personal", asked, kind, [Step(user, ack(rng))])


@frame("preference", "personal")
def flight_seat(rng: random.Random, p: Persona) -> Fact:
    seat, why = pick(
        rng,
        [
            ("aisle", "my knees can't take being boxed in by the window"),
            ("window", "I like leaning on the wall and sleeping the whole way"),
        ],
    )
    user = f"When you look at flights for me, always pick an {seat} seat — {why}."
    asked = ask(
        rng,
        ["Which seat do I want when you book my flights?",
         "What kind of seat should you pick for me on flights?"],
        ["Where do I like to sit on a plane?",
         "Booking air travel for me, which spot in the row do I want?"],
    )  # fmt: skip
    return Fact("flight_seat", "preference", "personal", asked, seat, [Step(user, ack(rng))])


@frame("preference", "personal")
def workout_time(rng: random.Random, p: Persona) -> Fact:
    slot, text = pick(
        rng,
        [
            ("early morning", "I run at six, before anyone else is up — evenings never work"),
            ("lunchtime", "I go for a swim during my lunch break, it's the only free hour"),
            ("late evening", "I lift weights after the kids are in bed, around nine"),
        ],
    )
    user = f"For the training plan, keep in mind {text}."
    asked = ask(
        rng,
        ["What time of day fits my training?", "When should the training plan put my sessions?"],
        ["At what time of day do I usually exercise?", "When do I fit my workouts in?"],
    )
    return Fact("workout_time", "preference", "personal", asked, slot, [Step(user, ack(rng))])


@frame("preference", "personal")
def focus_music(rng: random.Random, p: Persona) -> Fact:
    music = pick(rng, ["film scores", "lo-fi hip hop", "baroque harpsichord", "bossa nova"])
    user = f"Can you build me a playlist for deep work? I concentrate best with {music} on."
    reply = (
        "Sure — here's a two-hour list, grouped so the energy stays level and nothing jolts "
        "you out of focus."
    )
    asked = ask(
        rng,
        ["What music helps me concentrate?", "What should go on a playlist for deep work?"],
        ["Which sounds help me focus?",
         "What do I put on in the background to get into a flow state?"],
    )  # fmt: skip
    return Fact("focus_music", "preference", "personal", asked, music, [Step(user, reply)])


@frame("preference", "personal")
def lodging(rng: random.Random, p: Persona) -> Fact:
    kind = pick(
        rng,
        ["small family-run guesthouses", "apartments with a kitchen", "hostels with private rooms"],
    )
    user = f"For accommodation I really prefer {kind} over big chain hotels."
    asked = ask(
        rng,
        ["What accommodation do I prefer?", "Should you book me into big chain hotels?"],
        ["What sort of place do I like to stay in when travelling?",
         "Which kind of lodging should you look for on my trips?"],
    )  # fmt: skip
    return Fact("lodging", "preference", "personal", asked, kind, [Step(user, ack(rng))])


@frame("preference", "personal")
def herb(rng: random.Random, p: Persona) -> Fact:
    name = pick(rng, ["cilantro", "dill", "tarragon"])
    user = f"Please leave {name} out of anything you suggest, it tastes like soap to me."
    asked = ask(
        rng,
        ["Which ingredient tastes like soap to me?",
         "What should you leave out of the dishes you suggest?"],
        ["Which herb can't I stand in my food?",
         "Is there a seasoning you should avoid in recipes for me?"],
    )  # fmt: skip
    return Fact("herb", "preference", "personal", asked, name, [Step(user, ack(rng))], [name])


@frame("preference", "personal")
def reading_format(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            "I only read on my Kobo now — paperbacks hurt my wrists after a chapter.",
            "Everything I read is on the e-reader these days, physical books just pile up.",
        ],
    )
    asked = ask(
        rng,
        ["How do I read these days?", "What do I read on?"],
        ["Do I prefer printed novels or digital ones?", "In what format do I consume literature?"],
    )
    return Fact("reading", "preference", "personal", asked, "e-books", [Step(user, ack(rng))])


@frame("preference", "coding")
def editor(rng: random.Random, p: Persona) -> Fact:
    ed = pick(rng, ["Neovim", "Emacs", "Helix", "Sublime Text"])
    user = f"Give me shortcuts for {ed} please, I never touch VS Code menus."
    asked = ask(
        rng,
        ["Which editor's shortcuts should you give me?", "Do I use VS Code?"],
        ["Which text editor do I code in?", "What do I use to write code day to day?"],
    )
    return Fact("editor", "preference", "coding", asked, ed, [Step(user, ack(rng))], [ed])


@frame("preference", "coding")
def test_framework(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            "For Python examples I want pytest with plain asserts and fixtures, no unittest "
            "classes.",
            "When you write tests for me in Python, use pytest functions — I find TestCase "
            "subclasses noisy.",
        ],
    )
    asked = ask(
        rng,
        ["How should you write Python tests for me?", "What style of Python tests do I want?"],
        ["What testing library should you assume for my code?",
         "How do I like my unit checks written?"],
    )  # fmt: skip
    return Fact("test_framework", "preference", "coding", asked, "pytest", [Step(user, ack(rng))])


@frame("preference", "coding")
def commit_style(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            "We follow Conventional Commits, so prefix every commit message with feat:, fix: or "
            "chore:.",
            "Commit messages in our repos need the Conventional Commits prefixes (feat:, fix:, "
            "docs:).",
        ],
    )
    asked = ask(
        rng,
        ["What format should my commit messages follow?",
         "Which prefix convention do we use for commit messages?"],
        ["How should the notes I record in version control be worded?",
         "What convention do my teams use when describing a change in git history?"],
    )  # fmt: skip
    answer = "Conventional Commits"
    return Fact("commit_style", "preference", "coding", asked, answer, [Step(user, ack(rng))])


@frame("preference", "coding")
def answer_style(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            "One request: keep answers short and in bullet points, skip the theory unless I ask.",
            "I prefer short replies — code first, a line of explanation after, no essays.",
        ],
    )
    asked = ask(
        rng,
        ["How short should your answers be?", "What kind of replies do I prefer?"],
        ["How do I like your responses laid out?", "What length of response do I want from you?"],
    )
    return Fact("answer_style", "preference", "coding", asked, "short", [Step(user, ack(rng))])


@frame("preference", "coding")
def js_package_manager(rng: random.Random, p: Persona) -> Fact:
    pm = pick(rng, ["pnpm", "Bun", "Yarn Berry"])
    user = f"For JavaScript stuff I've standardised on {pm}; don't give me npm commands."
    asked = ask(
        rng,
        ["Should you give me npm commands?",
         "What have I standardised on for JavaScript dependencies?"],
        ["Which tool do I use to install frontend dependencies?",
         "When you give me web install instructions, which installer should they use?"],
    )  # fmt: skip
    return Fact("js_pm", "preference", "coding", asked, pm, [Step(user, ack(rng))], [pm])


@frame("preference", "coding")
def script_language(rng: random.Random, p: Persona) -> Fact:
    lang = pick(rng, ["Go", "Rust", "Python"])
    user = f"I'd rather write small internal tools in {lang} than Bash — way easier to maintain."
    asked = ask(
        rng,
        ["Which language do I use for small internal tools?", "Do I write my tools in Bash?"],
        ["Which language do I favour for little command-line utilities?",
         "What do I prefer over shell scripts for quick helper programs?"],
    )  # fmt: skip
    return Fact("script_lang", "preference", "coding", asked, lang, [Step(user, ack(rng))])


# -- fact ----------------------------------------------------------------------------------------


@frame("fact", "personal", "pet_name")
def pet_name(rng: random.Random, p: Persona) -> Fact:
    species, breed, name, pron, word = p.pet
    user = pick(
        rng,
        [
            f"Big news: we adopted {breed} from the rescue centre on Saturday, the kids named "
            f"{pron} {name}.",
            f"We brought home {breed} from the shelter this weekend! {name} is what we're "
            f"calling {pron}.",
        ],
    )
    reply = (
        "Congratulations! The first couple of weeks are all about routine: same feeding times, "
        "a quiet corner, short walks or play sessions."
    )
    asked = ask(
        rng,
        [f"What is our {word} called?", f"What name did we give the {word}?"],
        [f"What is our new {species} called?", "What did we name the animal we took in?"],
    )
    return Fact("pet_name", "fact", "personal", asked, name, [Step(user, reply)])


@frame("fact", "personal", "sister_city")
def sister_city(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            f"My sister {p.sister} just moved to {p.sister_city} for a job at the university "
            "hospital.",
            f"{p.sister} (my older sister) has relocated to {p.sister_city}, she starts at the "
            "hospital there next month.",
        ],
    )
    reply = "That's a big move — hope the new job goes well for her."
    asked = ask(
        rng,
        ["Which city is my sister in now?", f"Where does {p.sister} live now?"],
        ["Which town does my sibling live in these days?", "Where is my sibling based nowadays?"],
    )
    city = p.sister_city
    return Fact("sister_city", "fact", "personal", asked, city, [Step(user, reply)], [city])


@frame("fact", "personal")
def partner_job(rng: random.Random, p: Persona) -> Fact:
    rel, name, _pr = p.partner
    job = pick(
        rng,
        [
            ("a paediatric nurse", "nurse"),
            ("a structural engineer", "engineer"),
            ("a secondary-school chemistry teacher", "teacher"),
            ("a sous-chef", "chef"),
            ("an air traffic controller", "controller"),
        ],
    )
    user = f"My {rel} {name} works as {job[0]}, so shifts are all over the place at home."
    reply = (
        "Irregular shifts are hard on a household. A shared calendar with colour-coded shifts "
        "helps a lot."
    )
    asked = ask(
        rng,
        [f"What does my {rel} do for work?", f"What is {name}'s job?"],
        ["What does my other half do for a living?", "What's my significant other's profession?"],
    )
    return Fact("partner_job", "fact", "personal", asked, job[1], [Step(user, reply)])


@frame("fact", "personal")
def kid_activity(rng: random.Random, p: Persona) -> Fact:
    rel, name, pron = p.kid
    act = pick(rng, ["violin", "judo", "swimming", "chess club", "ballet"])
    user = f"{name} has started {act} on Saturday mornings, {pron} loves it so far."
    asked = ask(
        rng,
        [f"What does {name} do on Saturday mornings?", f"What has {name} started?"],
        [f"What does my {rel} do at the weekend before lunch?",
         f"Which hobby has my {rel} taken up?"],
    )  # fmt: skip
    return Fact("kid_activity", "fact", "personal", asked, act, [Step(user, ack(rng))], [act])


@frame("fact", "personal")
def friend_allergy(rng: random.Random, p: Persona) -> Fact:
    friend = p.friends[0]
    food = pick(rng, ["peanuts", "shellfish", "sesame", "kiwi"])
    user = f"For Saturday's dinner party: {friend} is seriously allergic to {food}."
    reply = "Thanks — I'll keep it out of every course and suggest you label the dishes."
    asked = ask(
        rng,
        [f"What is {friend} allergic to?", "Who at the dinner party can't eat something?"],
        ["Which of my guests has a food intolerance, and to what?",
         "Which food would make one of my guests ill?"],
    )  # fmt: skip
    return Fact("friend_allergy", "fact", "personal", asked, food, [Step(user, reply)], [food])


@frame("fact", "personal")
def car(rng: random.Random, p: Persona) -> Fact:
    model = pick(rng, ["Škoda Octavia estate", "Toyota Yaris hybrid", "Kia e-Niro", "Volvo V60"])
    user = f"We finally replaced the old banger with a second-hand {model}."
    reply = "Nice upgrade. Worth checking when its next service and MOT are due."
    asked = ask(
        rng,
        ["What did we get to replace the old banger?", "Which second-hand model did we buy?"],
        ["What vehicle do we drive now?", "Which motor did we purchase recently?"],
    )
    return Fact("car", "fact", "personal", asked, model, [Step(user, reply)], [model.split()[0]])


@frame("fact", "personal")
def language_learning(rng: random.Random, p: Persona) -> Fact:
    lang = pick(rng, ["Portuguese", "Japanese", "Welsh", "Turkish", "Korean"])
    months = pick(rng, ["three", "five", "eight"])
    user = f"I've been doing {lang} on Duolingo for {months} months, the streak is holding up!"
    asked = ask(
        rng,
        ["What am I doing on Duolingo?", "Which language is my Duolingo streak in?"],
        ["Which foreign tongue am I studying?", "What am I practising with a phone app?"],
    )
    return Fact("language", "fact", "personal", asked, lang, [Step(user, ack(rng))], [lang])


@frame("fact", "personal", "employer")
def employer(rng: random.Random, p: Persona) -> Fact:
    org = pick(
        rng, ["Fernwood Labs", "Harbourline Logistics", "Northgate Insurance", "Bluefen Studios"]
    )
    user = f"I'm a data analyst at {org} — mostly dashboards and the odd forecasting model."
    asked = ask(
        rng,
        ["Where do I work as a data analyst?", "Which company am I an analyst at?"],
        ["Where am I employed?", "Who is my employer?"],
    )
    terms = [org.split()[0]]
    return Fact("employer", "fact", "personal", asked, org, [Step(user, ack(rng))], terms)


@frame("fact", "coding")
def billing_db(rng: random.Random, p: Persona) -> Fact:
    db = pick(rng, ["Postgres 13", "MySQL 5.7", "MariaDB 10.6", "SQL Server 2019"])
    user = (
        f"Context for later: our billing service sits on {db}, and we can't upgrade it before Q3."
    )
    asked = ask(
        rng,
        ["Which database does our billing service use?", "What does the billing service run on?"],
        ["Which database engine and version backs the invoicing backend?",
         "What data store does the payments-and-invoices system use?"],
    )  # fmt: skip
    return Fact("billing_db", "fact", "coding", asked, db, [Step(user, ack(rng))], [db])


@frame("fact", "coding")
def hosting(rng: random.Random, p: Persona) -> Fact:
    host = pick(rng, ["Fly.io", "Render", "Hetzner Cloud", "DigitalOcean App Platform"])
    user = f"All our services deploy to {host} from GitHub Actions on every merge."
    asked = ask(
        rng,
        ["Where do our services deploy to?", "Which platform does GitHub Actions deploy us to?"],
        ["Where do our applications run in production?", "Which provider hosts our stuff live?"],
    )
    terms = [host.split()[0]]
    return Fact("hosting", "fact", "coding", asked, host, [Step(user, ack(rng))], terms)


@frame("fact", "coding")
def mobile_lead(rng: random.Random, p: Persona) -> Fact:
    lead = p.colleagues[0]
    user = (
        f"{lead} is the tech lead on the iOS and Android app, so architecture calls go through "
        "them."
    )
    asked = ask(
        rng,
        ["Who is the tech lead for the Android app?", "Who makes the architecture calls on iOS?"],
        ["Who makes the design decisions for our phone apps?", "Who heads engineering on mobile?"],
    )
    return Fact("mobile_lead", "fact", "coding", asked, lead, [Step(user, ack(rng))])


@frame("fact", "coding")
def ci_duration(rng: random.Random, p: Persona) -> Fact:
    mins = pick(rng, ["22", "35", "48"])
    user = f"Our pipeline takes about {mins} minutes end to end, mostly the integration suite."
    asked = ask(
        rng,
        ["How many minutes does our pipeline take?",
         "How long does the pipeline with the integration suite run?"],
        ["How long does a full CI run take for us?",
         "How much time until our build-and-test checks finish?"],
    )  # fmt: skip
    answer = f"{mins} minutes"
    return Fact("ci_duration", "fact", "coding", asked, answer, [Step(user, ack(rng))])


@frame("fact", "coding")
def python_pin(rng: random.Random, p: Persona) -> Fact:
    ver, lib = pick(
        rng, [("3.9", "the GDAL"), ("3.10", "the TensorFlow"), ("3.8", "an old Oracle driver")]
    )
    user = f"Annoyingly the monorepo is pinned to Python {ver} because of {lib} wheels."
    asked = ask(
        rng,
        ["Which Python version is the monorepo pinned to?",
         "Which Python is our monorepo stuck on?"],
        ["Which interpreter version are we stuck on in the main repository?",
         "What language runtime release does our codebase require?"],
    )  # fmt: skip
    return Fact(
        "python_pin", "fact", "coding", asked, ver, [Step(user, ack(rng))], [f"Python {ver}"]
    )


@frame("fact", "coding")
def dashboard_framework(rng: random.Random, p: Persona) -> Fact:
    fw = pick(rng, ["SvelteKit", "Vue 3", "Angular 17", "SolidJS"])
    user = f"The internal admin dashboard is built with {fw} and Tailwind."
    asked = ask(
        rng,
        ["What is the admin dashboard built with?",
         "Which framework does our internal dashboard use?"],
        ["What UI framework is the back-office panel written in?",
         "Which frontend library powers our staff tool?"],
    )  # fmt: skip
    return Fact(
        "dashboard_fw", "fact", "coding", asked, fw, [Step(user, ack(rng))], [fw.split()[0]]
    )


@frame("fact", "coding")
def branching(rng: random.Random, p: Persona) -> Fact:
    user = pick(
        rng,
        [
            "We do trunk-based development: main is always deployable and there are no long-lived "
            "branches.",
            "Everything merges straight to main behind feature flags — trunk-based, short-lived "
            "branches only.",
        ],
    )
    asked = ask(
        rng,
        ["What's our approach to branches and main?", "How long do our branches live?"],
        ["What branching strategy does my team follow?",
         "How does my team organise its git workflow?"],
    )  # fmt: skip
    return Fact("branching", "fact", "coding", asked, "trunk-based", [Step(user, ack(rng))])


@frame("fact", "coding")
def oncall(rng: random.Random, p: Persona) -> Fact:
    n = pick(rng, ["every third week", "one week in five", "every other weekend"])
    user = f"I'm on the pager rota {n}, so some weeks I'm slower to reply."
    asked = ask(
        rng,
        ["How often am I on the pager rota?", "Which weeks am I on the pager?"],
        ["How often am I on call?", "How frequently is it my turn to handle incidents?"],
    )
    return Fact("oncall", "fact", "coding", asked, n, [Step(user, ack(rng))])


# -- temporal ------------------------------------------------------------------------------------


DAY = timedelta(days=1)


def later(p: Persona, rng: random.Random, lo: int = 20, hi: int = 80) -> date:
    return p.start + timedelta(days=rng.randint(lo, hi))


@frame("temporal", "personal", "pet_vet")
def vet(rng: random.Random, p: Persona) -> Fact:
    d = later(p, rng)
    when = pretty(d)
    t = pick(rng, ["9:30", "11:15", "4:40pm"])
    name = p.pet[2]
    user = f"Booked {name} in with the vet for {when} at {t} for the jabs."
    asked = ask(
        rng,
        [f"When is {name}'s vet appointment?", "What day is the vet booked for?"],
        ["When is the animal check-up appointment?",
         "What day did I schedule the vaccinations for our pet?"],
    )  # fmt: skip
    steps = [Step(user, ack(rng))]
    return Fact("vet", "temporal", "personal", asked, when, steps, [when], before=d - DAY * 3)


@frame("temporal", "personal", "trip")
def flight_out(rng: random.Random, p: Persona) -> Fact:
    d = later(p, rng, 30, 90)
    back = d + timedelta(days=rng.randint(4, 12))
    city = pick(rng, ["Lisbon", "Reykjavik", "Naples", "Seville", "Split"])
    user = f"Flights are booked! We fly to {city} on {pretty(d)} and come home {pretty(back)}."
    asked = ask(
        rng,
        [f"What day do we fly to {city}?", "When are our flights out?"],
        ["When does our holiday start?", "On what date is our departure for the trip?"],
    )
    steps = [Step(user, ack(rng))]
    return Fact(
        "flight_out", "temporal", "personal", asked, pretty(d), steps, [pretty(d)], before=d
    )


@frame("temporal", "personal")
def friend_birthday(rng: random.Random, p: Persona) -> Fact:
    friend = p.friends[1]
    d = later(p, rng, 25, 120)
    day = f"{d.day} {MONTHS[d.month - 1]}"
    user = f"{friend} turns forty on {day}; remind me to order a present a week before."
    asked = ask(
        rng,
        [f"When does {friend} turn forty?", f"When do I need a present for {friend}?"],
        ["When is my friend's big birthday?",
         "On what date does my mate celebrate a milestone birthday?"],
    )  # fmt: skip
    steps = [Step(user, ack(rng))]
    return Fact(
        "friend_bday", "temporal", "personal", asked, day, steps, [day], before=d - DAY * 10
    )


@frame("temporal", "personal")
def passport(rng: random.Random, p: Persona) -> Fact:
    month = pick(rng, MONTHS)
    user = f"Just checked: my passport runs out in {month} next year, need to sort that."
    asked = ask(
        rng,
        ["When does my passport run out?", "In which month is my passport no longer valid?"],
        ["When does my travel document expire?", "When do I need to renew my ID for going abroad?"],
    )
    return Fact("passport", "temporal", "personal", asked, month, [Step(user, ack(rng))])


@frame("temporal", "personal")
def ordering_home(rng: random.Random, p: Persona) -> Fact:
    d1 = later(p, rng, 10, 40)
    d2 = d1 + timedelta(days=rng.randint(3, 20))
    first, second = ("plumber", "dentist") if rng.random() < 0.5 else ("dentist", "plumber")
    text = {
        "plumber": "The plumber is coming to fix the boiler on {d}, morning slot.",
        "dentist": "Dentist appointment is on {d} for that cracked filling.",
    }
    steps = [
        Step(text[first].format(d=pretty(d1)), ack(rng)),
        Step(text[second].format(d=pretty(d2)), ack(rng)),
    ]
    rng.shuffle(steps)
    asked = ask(
        rng,
        ["Which is first, the plumber or the dentist?",
         "Is the boiler fix before the dentist appointment?"],
        ["Which comes first, the heating repair or my dental visit?",
         "Is the heating engineer booked before or after the tooth doctor?"],
    )  # fmt: skip
    return Fact("ordering_home", "temporal", "personal", asked, first, steps, before=d1 - DAY * 2)


@frame("temporal", "coding")
def ship_deadline(rng: random.Random, p: Persona) -> Fact:
    feat, para = pick(
        rng,
        [
            ("the SSO integration", "single sign-on work"),
            ("the CSV export", "spreadsheet download feature"),
            ("the dark-mode release", "night theme"),
        ],
    )
    day = later(p, rng, 15, 60)
    d = pretty(day)
    user = f"Sales promised {feat} to a customer, so it has to ship by {d}, hard deadline."
    asked = ask(
        rng,
        [f"When does {feat} have to ship?", "What's the hard deadline Sales promised?"],
        [f"By when must the {para} be released?", f"What's the due date for the {para}?"],
    )
    steps = [Step(user, ack(rng))]
    return Fact("deadline", "temporal", "coding", asked, d, steps, [d], before=day - DAY * 7)


@frame("temporal", "coding")
def code_freeze(rng: random.Random, p: Persona) -> Fact:
    day = later(p, rng, 20, 70)
    d = pretty(day)
    user = f"Heads-up: code freeze for the quarterly release starts {d}."
    asked = ask(
        rng,
        ["When does the code freeze start?", "When is the freeze for the quarterly release?"],
        ["When do we stop merging for the upcoming version?",
         "From what date are changes locked before the next version?"],
    )  # fmt: skip
    steps = [Step(user, ack(rng))]
    return Fact("freeze", "temporal", "coding", asked, d, steps, [d], before=day - DAY * 3)


@frame("temporal", "coding")
def conference_talk(rng: random.Random, p: Persona) -> Fact:
    conf = pick(rng, ["PyCon Lithuania", "FOSDEM", "RustFest", "JSConf EU", "DevOpsDays Ghent"])
    day = later(p, rng, 30, 100)
    d = pretty(day)
    user = f"My talk got accepted at {conf}! I'm presenting on {d}."
    asked = ask(
        rng,
        [f"When is my talk at {conf}?", "What day am I presenting my talk?"],
        ["What day am I speaking at the conference?", "When is my slot on stage at the event?"],
    )
    steps = [Step(user, "Congratulations! Want help structuring the slides?")]
    return Fact("talk", "temporal", "coding", asked, d, steps, [d], before=day - DAY * 14)


@frame("temporal", "coding")
def ordering_work(rng: random.Random, p: Persona) -> Fact:
    d1 = later(p, rng, 10, 30)
    d2 = d1 + timedelta(days=rng.randint(4, 15))
    first, second = ("migration", "audit") if rng.random() < 0.5 else ("audit", "migration")
    text = {
        "migration": "We're running the database migration on {d}, late evening.",
        "audit": "The security auditors arrive on {d} for the SOC 2 review.",
    }
    steps = [
        Step(text[first].format(d=pretty(d1)), ack(rng)),
        Step(text[second].format(d=pretty(d2)), ack(rng)),
    ]
    rng.shuffle(steps)
    asked = ask(
        rng,
        ["Is the database migration before or after the auditors arrive?",
         "Which is first, the migration or the SOC 2 review?"],
        ["Does the schema move happen before or after the compliance inspection?",
         "Which is earlier: the data store upgrade or the external assessment?"],
    )  # fmt: skip
    return Fact("ordering_work", "temporal", "coding", asked, first, steps, before=d1 - DAY * 2)


# -- update --------------------------------------------------------------------------------------


@frame("update", "personal", "trip")
def trip_destination(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["Lisbon", "Porto", "Madeira", "Seville", "Bordeaux", "Bruges"], 2)
    s1 = Step(
        f"We're thinking of {a} for the May bank holiday weekend, flights look cheap.", ack(rng)
    )
    s2 = Step(
        f"Change of plan — hotels in {a} were silly money, so we booked {b} instead.",
        "Good call. Want me to draft an itinerary for the new place?",
    )
    asked = ask(
        rng,
        ["Where are we going for the May bank holiday weekend?",
         "Where did we book for the bank holiday?"],
        ["Where are we headed for the long weekend in spring?",
         "What's our destination for the spring break now?"],
    )  # fmt: skip
    return Fact("trip", "update", "personal", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "personal", "manager")
def one_to_one(rng: random.Random, p: Persona) -> Fact:
    boss = p.colleagues[1]
    a, b = rng.sample(["Monday", "Tuesday", "Wednesday", "Thursday"], 2)
    s1 = Step(f"My weekly one-to-one with {boss} is on {a} mornings.", ack(rng))
    s2 = Step(f"{boss} moved our catch-ups to {b} afternoons from now on.", ack(rng))
    asked = ask(
        rng,
        [f"When is my one-to-one with {boss} now?", f"Which day are my catch-ups with {boss}?"],
        ["Which day is my regular check-in with my manager now?",
         "When do I meet my boss each week at the moment?"],
    )  # fmt: skip
    return Fact("one_to_one", "update", "personal", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "personal")
def sport(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["bouldering", "spin classes", "swimming", "yoga", "rowing"], 2)
    s1 = Step(f"Signed up for a {a} membership this week, hoping it sticks.", ack(rng))
    s2 = Step(f"Cancelled the {a} thing, switched to {b} at the leisure centre instead.", ack(rng))
    asked = ask(
        rng,
        ["What am I doing at the leisure centre?",
         "Do I still have that membership I signed up for?"],
        ["What do I currently do to keep fit?", "Which physical activity am I doing these days?"],
    )  # fmt: skip
    return Fact("sport", "update", "personal", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "personal")
def phone(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["Pixel 8", "iPhone 15", "Fairphone 5", "Galaxy S23"], 2)
    s1 = Step(
        f"Ordered the {a}, arriving Thursday.", "Nice. Want a checklist for moving your data?"
    )
    s2 = Step(f"Sent the {a} back, the battery was awful — kept a {b} instead.", ack(rng))
    asked = ask(
        rng,
        ["Which model did I keep after the awful battery?",
         "What did I get instead of the one I ordered?"],
        ["Which handset am I using now?", "What mobile did I end up with?"],
    )  # fmt: skip
    return Fact("phone", "update", "personal", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "personal")
def sofa_budget(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["£600", "£800", "£1,200", "£1,500"], 2)
    s1 = Step(
        f"Our budget for the new sofa is {a}, can you shortlist some?",
        "Sure — here are five that fit, with delivery times.",
    )
    s2 = Step(f"We've changed our minds on money: the sofa budget is now {b}.", ack(rng))
    asked = ask(
        rng,
        ["What's our sofa budget?", "How much is the budget for the new sofa?"],
        ["How much are we willing to spend on the couch?",
         "What's the current spending limit for the living-room seating?"],
    )  # fmt: skip
    return Fact("sofa", "update", "personal", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "coding")
def search_backend(rng: random.Random, p: Persona) -> Fact:
    a = pick(rng, ["Meilisearch", "Typesense", "OpenSearch"])
    s1 = Step(
        f"We're planning to move product search from Elasticsearch to {a} next quarter.", ack(rng)
    )
    s2 = Step(
        f"Scrapped the {a} idea. We're staying on Elasticsearch and just upgrading to 8.x.",
        ack(rng),
    )
    asked = ask(
        rng,
        ["Are we still moving product search off Elasticsearch?",
         "What's the plan for product search?"],
        ["What's the current plan for our catalogue query engine?",
         "Are we still switching the catalogue lookup technology?"],
    )  # fmt: skip
    answer = "stay on Elasticsearch, upgrade to 8.x"
    return Fact("search", "update", "coding", asked, answer, [s1, s2], ["8.x"], ordered=True)


@frame("update", "coding")
def new_api_host(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["Heroku", "Railway", "Cloud Run", "AWS App Runner"], 2)
    s1 = Step(f"The new notifications API will live on {a}, decided in standup.", ack(rng))
    s2 = Step(f"Pricing killed {a} for us — the notifications API goes on {b} after all.", ack(rng))
    asked = ask(
        rng,
        ["Where does the notifications API go?",
         "Which platform will host the new notifications API?"],
        ["Where will the new alerting service be hosted?",
         "Which platform did we settle on for the push-message backend?"],
    )  # fmt: skip
    return Fact("api_host", "update", "coding", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "coding")
def task_queue(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["Celery", "RQ", "Dramatiq", "Huey"], 2)
    s1 = Step(f"We picked {a} for the background jobs in {p.project}.", ack(rng))
    s2 = Step(f"Dropped {a}, it was too heavy for us. Going with {b}.", ack(rng))
    asked = ask(
        rng,
        [f"What are we using for background jobs in {p.project}?",
         "Which library runs our background jobs?"],
        ["Which job-queue library did we settle on?", "What are we using for async workers now?"],
    )  # fmt: skip
    return Fact("task_queue", "update", "coding", asked, b, [s1, s2], [b], ordered=True)


@frame("update", "coding", "manager")
def manager_change(rng: random.Random, p: Persona) -> Fact:
    a, b = p.colleagues[2], p.colleagues[3]
    s1 = Step(f"My line manager is {a}, who's been great about the remote days.", ack(rng))
    s2 = Step(f"Reorg news: I now report to {b} instead of {a}.", ack(rng))
    asked = ask(
        rng,
        ["Who is my line manager?", "Who do I report to now?"],
        ["Who is my boss now?", "Who's in charge of me at work at the moment?"],
    )
    return Fact("manager", "update", "coding", asked, b, [s1, s2], [], ordered=True)


@frame("update", "coding")
def node_version(rng: random.Random, p: Persona) -> Fact:
    a, b = rng.sample(["Node 18", "Node 20", "Node 22"], 2)
    s1 = Step(f"Production runs {a} for now.", ack(rng))
    s2 = Step(
        f"We've finished the runtime upgrade, everything is on {b} in prod since yesterday.",
        ack(rng),
    )
    asked = ask(
        rng,
        ["Which Node version runs in production?", "What runtime are we on in prod?"],
        ["Which JavaScript engine version is live on our servers?",
         "What release of the server-side JS platform do we deploy on?"],
    )  # fmt: skip
    return Fact("node_version", "update", "coding", asked, b, [s1, s2], [b], ordered=True)


# -- multi-hop -----------------------------------------------------------------------------------


@frame("multi_hop", "personal", "sister_city")
def niece_city(rng: random.Random, p: Persona) -> Fact:
    niece = pick(rng, ["Asha", "Elodie", "Maren", "Tilly"])
    s1 = Step(f"{p.sister}'s daughter {niece} started school this week, she's so proud.", ack(rng))
    s2 = Step(
        f"{p.sister} and her family have settled in {p.sister_city} now, the house is lovely.",
        ack(rng),
    )
    asked = ask(
        rng,
        [f"Which city does {niece} live in?", f"Where is {niece}'s family settled?"],
        ["Which city is my sister's little girl growing up in?",
         "In what town does my niece live?"],
    )  # fmt: skip
    city = p.sister_city
    return Fact("niece_city", "multi_hop", "personal", asked, city, [s1, s2], [city])


@frame("multi_hop", "personal", "pet_vet")
def pet_sitter(rng: random.Random, p: Persona) -> Fact:
    sitter = p.friends[2]
    name = p.pet[2]
    place = pick(rng, ["Crete", "Norway", "Lake Garda", "Cornwall"])
    s1 = Step(f"{sitter} from next door feeds {name} whenever we're away.", ack(rng))
    s2 = Step(f"{sitter} is off to {place} for the whole of August.", ack(rng))
    asked = ask(
        rng,
        [f"Where will the person who feeds {name} be in August?",
         f"Who feeds {name} when we're away, and where are they going in August?"],
        ["Where will the neighbour who looks after our pet be in late summer?",
         "Is the person who minds our animal around in late summer, and if not where are they?"],
    )  # fmt: skip
    return Fact("pet_sitter", "multi_hop", "personal", asked, place, [s1, s2], [place])


@frame("multi_hop", "personal", "manager")
def manager_allergy(rng: random.Random, p: Persona) -> Fact:
    boss = p.colleagues[4]
    food = pick(rng, ["mushrooms", "strawberries", "walnuts"])
    s1 = Step(f"My new team lead is {boss}, who joined from the Berlin office.", ack(rng))
    s2 = Step(f"Note for the team lunch: {boss} can't have {food}, allergy.", ack(rng))
    asked = ask(
        rng,
        ["What can't my new team lead have at lunch?", "What is my team lead allergic to?"],
        ["Is there anything my new supervisor can't eat?", "What food must my new boss skip?"],
    )
    return Fact("manager_allergy", "multi_hop", "personal", asked, food, [s1, s2], [food])


@frame("multi_hop", "personal")
def school_holiday(rng: random.Random, p: Persona) -> Fact:
    rel, name, _pr = p.kid
    school = pick(rng, ["St Brigid's Primary", "Hollowbrook Academy", "Riverside Montessori"])
    day = later(p, rng, 20, 60)
    d = pretty(day)
    s1 = Step(f"{name} got a place at {school}, we're thrilled.", ack(rng))
    s2 = Step(f"{school} breaks up for half-term on {d}.", ack(rng))
    asked = ask(
        rng,
        [f"When does {name}'s half-term start?", f"When does {name} break up for half-term?"],
        [f"When does my {rel}'s school holiday start?",
         f"When is my {rel} off for the mid-term break?"],
    )  # fmt: skip
    steps = [s1, s2]
    return Fact("school_holiday", "multi_hop", "personal", asked, d, steps, [d], before=day)


@frame("multi_hop", "coding")
def owner_leave(rng: random.Random, p: Persona) -> Fact:
    owner = p.colleagues[5]
    month = pick(rng, ["September", "October", "the end of November"])
    s1 = Step(f"The payments-reconciliation job is owned by {owner}'s team.", ack(rng))
    s2 = Step(f"{owner} is on parental leave until {month}.", ack(rng))
    asked = ask(
        rng,
        ["When is the owner of the payments-reconciliation job back from leave?",
         "Until when is whoever owns the reconciliation job on leave?"],
        ["When will the person responsible for matching up transactions be back?",
         "Until when is the owner of the payment-matching batch away?"],
    )  # fmt: skip
    return Fact("owner_leave", "multi_hop", "coding", asked, month, [s1, s2], [month])


@frame("multi_hop", "coding")
def staging_reset(rng: random.Random, p: Persona) -> Fact:
    name = pick(rng, ["pg-sandbox", "db-preprod-eu", "stagingdb2"])
    day = pick(rng, ["Sunday night", "every Friday at 6pm", "the first of each month"])
    s1 = Step(f"Our staging environment's database is the instance called {name}.", ack(rng))
    s2 = Step(f"{name} gets wiped and restored from the anonymised dump {day}.", ack(rng))
    asked = ask(
        rng,
        ["When does the staging database get wiped?",
         "How often is the staging environment's database restored?"],
        ["When is the pre-production data reset?",
         "How often does the test setup's data get refreshed?"],
    )  # fmt: skip
    return Fact("staging_reset", "multi_hop", "coding", asked, day, [s1, s2], [day])


@frame("multi_hop", "coding")
def reviewer(rng: random.Random, p: Persona) -> Fact:
    svc, para = pick(
        rng,
        [("the pricing engine", "price calculation service"),
         ("the fraud scorer", "risk-scoring component")],
    )  # fmt: skip
    lang = pick(rng, ["Elixir", "Scala", "Haskell"])
    rev = p.colleagues[6]
    s1 = Step(
        f"{svc.capitalize()} is written in {lang}, the only one of our services that is.", ack(rng)
    )
    s2 = Step(
        f"Anything in {lang} has to be reviewed by {rev}, nobody else knows it well.", ack(rng)
    )
    asked = ask(
        rng,
        [f"Who has to review changes to {svc}?", f"Who reviews code for {svc}?"],
        [f"Who needs to approve changes to the {para}?",
         f"Whose sign-off do I need for a pull request on the {para}?"],
    )  # fmt: skip
    return Fact("reviewer", "multi_hop", "coding", asked, rev, [s1, s2])


@frame("multi_hop", "coding")
def runner_os(rng: random.Random, p: Persona) -> Fact:
    pool = pick(rng, ["blue", "orion", "kappa"])
    os_name = pick(rng, ["Windows Server 2022", "Alpine Linux on ARM", "macOS 14"])
    s1 = Step(f"The flaky checkout test only ever fails on the {pool} runner pool.", ack(rng))
    s2 = Step(f"FYI the {pool} pool is the one running {os_name}.", ack(rng))
    asked = ask(
        rng,
        ["Which OS does the flaky checkout test fail on?",
         "What operating system are the runners where the checkout test fails?"],
        ["On which platform does the unreliable purchase spec break?",
         "What OS are the CI machines where the payment-page spec is intermittent?"],
    )  # fmt: skip
    return Fact("runner_os", "multi_hop", "coding", asked, os_name, [s1, s2], [os_name])


# -- identifier ----------------------------------------------------------------------------------


@frame("identifier", "coding")
def ticket(rng: random.Random, p: Persona) -> Fact:
    key = f"{pick(rng, TICKET_PREFIXES)}-{rng.randint(1000, 9999)}"
    what, decision, term = pick(
        rng,
        [
            ("the nightly export double-counts refunds", "deduplicate on refund_id before summing",
             "refund_id"),
            ("the mobile login spins forever on slow networks",
             "add a 10 second timeout and a retry button", "retry button"),
            ("invoices in yen get rounded to two decimals",
             "store amounts in minor units per currency", "minor units"),
            ("the search index misses products edited after 11pm",
             "reindex on every update event, not nightly", "update event"),
        ],
    )  # fmt: skip
    user = f"{key} is the one where {what}. We agreed in the meeting to {decision}."
    asked = (
        pick(rng, [f"What did we decide to do about {key}?", f"What's the fix for {key}?"]),
        "identifier",
    )
    mentions = [
        Step(
            f"Can you help me write the QA checklist for {key}?",
            "Sure: reproduce it on staging first, cover the edge cases listed in the ticket, "
            "confirm with an automated test, and note the build you verified.",
        ),
        Step(f"{key} got bumped to next sprint again.", "Worth raising at planning, then."),
    ]
    steps = [Step(user, ack(rng))]
    return Fact(
        "ticket", "identifier", "coding", asked, decision, steps, [term],
        mentions=mentions,
    )  # fmt: skip


@frame("identifier", "coding")
def error_code(rng: random.Random, p: Persona) -> Fact:
    code, cause, term = pick(
        rng,
        [
            ("ERR_OSSL_EVP_UNSUPPORTED", "webpack 4 hashing with MD4 on Node 17+", "MD4"),
            ("ORA-01555", "a long-running report reading while the batch updated the same rows",
             "long-running report"),
            ("SQLSTATE 40P01", "two workers locking orders and payments in opposite order",
             "opposite order"),
            ("X509_V_ERR_CERT_HAS_EXPIRED", "an intermediate certificate that lapsed on the proxy",
             "intermediate certificate"),
            ("NU1605", "a package downgrade pulled in by the old logging library",
             "logging library"),
            ("ERR_REQUIRE_ESM", "a dependency that went ESM-only in its last major", "ESM-only"),
        ],
    )  # fmt: skip
    user = f"Mystery solved: the {code} failures were caused by {cause}."
    asked = (
        pick(rng, [f"What was behind the {code} errors?", f"Why did we get {code}?"]),
        "identifier",
    )
    steps = [Step(user, "Nice detective work.")]
    mentions = [
        Step(
            f"Seeing {code} again on an old branch — probably the same thing as before?",
            "If the stack trace matches, rebase the branch onto main and it should go away.",
        )
    ]
    return Fact(
        "error_code", "identifier", "coding", asked, cause, steps, [term],
        mentions=mentions,
    )  # fmt: skip


@frame("identifier", "personal")
def rare_person(rng: random.Random, p: Persona) -> Fact:
    name = p.rare[0]
    rec, term = pick(
        rng,
        [
            ("a physio near the station who does sports massage", "sports massage"),
            ("the little bookshop on Calle Ancha for Spanish comics", "Calle Ancha"),
            ("a mortgage broker who doesn't charge a fee", "mortgage broker"),
            ("a tailor who can fix the suit in three days", "tailor"),
        ],
    )
    user = f"{name} from the book club recommended {rec}."
    asked = (
        pick(rng, [f"What did {name} suggest to me?", f"What tip did I get from {name}?"]),
        "identifier",
    )
    mentions = [
        Step(
            f"{name} is hosting book club next month, what should I bring?",
            "A bottle of something light or a homemade dip — easy to share while talking.",
        )
    ]
    steps = [Step(user, ack(rng))]
    return Fact(
        "rare_person", "identifier", "personal", asked, rec, steps, [term],
        mentions=mentions,
    )  # fmt: skip


@frame("identifier", "coding")
def package_version(rng: random.Random, p: Persona) -> Fact:
    pkg = f"{p.project}-authkit"
    ver = f"{rng.randint(2, 4)}.{rng.randint(0, 9)}.{rng.randint(1, 9)}"
    user = (
        f"Internal package {pkg} {ver} broke token refresh for everyone; we pinned the previous "
        "release."
    )
    asked = (
        pick(rng, [f"Which version of {pkg} caused trouble?", f"Which {pkg} release is broken?"]),
        "identifier",
    )
    mentions = [
        Step(
            f"How do I pin {pkg} in requirements.txt so Renovate leaves it alone?",
            f"Use an exact == pin for {pkg} with a comment saying why, and add it to "
            "Renovate's ignoreDeps until the fix lands.",
        )
    ]
    steps = [Step(user, ack(rng))]
    return Fact("package", "identifier", "coding", asked, ver, steps, [ver], mentions=mentions)


@frame("identifier", "personal")
def restaurant(rng: random.Random, p: Persona) -> Fact:
    place, dish = RESTAURANTS[rng.randrange(len(RESTAURANTS))]
    user = (
        f"Dinner at {place} last night was wonderful — the {dish} was the best thing I've eaten "
        "all year."
    )
    asked = (
        pick(rng, [f"What dish did I love at {place}?", f"What should I order again at {place}?"]),
        "identifier",
    )
    steps = [Step(user, "That sounds like a great night out!")]
    mentions = [
        Step(
            f"Is {place} the kind of place you need to book ahead for a Friday?",
            "For a popular spot on a Friday, yes — book a few days ahead or go early.",
        )
    ]
    return Fact(
        "restaurant", "identifier", "personal", asked, dish, steps, [dish], mentions=mentions
    )


@frame("identifier", "coding")
def hostname(rng: random.Random, p: Persona) -> Fact:
    host = pick(rng, HOSTS)
    role, term = pick(
        rng,
        [
            ("the nightly partner imports", "partner imports"),
            ("the Grafana alert relay", "Grafana"),
            ("the legacy PDF invoice renderer", "PDF invoice"),
            ("the SSH jump access for contractors", "SSH jump"),
        ],
    )
    user = f"Reminder for myself: {host} is the box that runs {role}, don't reboot it in the day."
    asked = (pick(rng, [f"What runs on {host}?", f"What is {host} used for?"]), "identifier")
    mentions = [
        Step(
            f"How do I check what's eating the disk on {host}?",
            "`df -h` for the filesystems, then `du -xh / | sort -rh | head` to find the culprit.",
        ),
        Step(
            f"{host} ran out of inodes again this morning.",
            "Usually a temp dir full of tiny files; a cleanup cron would stop it recurring.",
        ),
    ]
    steps = [Step(user, ack(rng))]
    return Fact(
        "hostname", "identifier", "coding", asked, role, steps, [term],
        mentions=mentions,
    )  # fmt: skip


@frame("identifier", "coding")
def feature_flag(rng: random.Random, p: Persona) -> Fact:
    flag = pick(
        rng,
        ["FF_LEGACY_TAX_ROUNDING", "ENABLE_BATCH_WEBHOOKS", "USE_V2_PRICING_CACHE",
         "SKIP_ADDRESS_NORMALISER"],
    )  # fmt: skip
    effect, term = pick(
        rng,
        [
            ("the totals mismatch for Belgian customers", "Belgian"),
            ("the timeouts on bulk order imports", "bulk order"),
            ("the duplicate emails after checkout", "duplicate emails"),
        ],
    )
    user = f"Turning on {flag} fixes {effect}, but only as a stopgap."
    asked = (
        pick(rng, [f"What problem does {flag} work around?", f"Why would I switch on {flag}?"]),
        "identifier",
    )
    mentions = [
        Step(
            f"Who should own the clean-up of {flag}?",
            "Whoever added it, with a removal date written in the flag's description.",
        )
    ]
    steps = [Step(user, ack(rng))]
    return Fact(
        "flag", "identifier", "coding", asked, effect, steps, [term],
        mentions=mentions,
    )  # fmt: skip


@frame("identifier", "personal")
def rare_doctor(rng: random.Random, p: Persona) -> Fact:
    name = p.rare[1].split()[-1]
    part = pick(rng, ["my knee", "my shoulder", "my lower back"])
    user = f"Dr {name} is the physio who finally sorted out {part} — three sessions and it's fine."
    asked = (pick(rng, [f"Who is Dr {name}?", f"What did Dr {name} treat me for?"]), "identifier")
    mentions = [
        Step(f"Dr {name}'s clinic moved to the high street, much easier to get to.", ack(rng))
    ]
    steps = [Step(user, ack(rng))]
    return Fact(
        "rare_doctor", "identifier", "personal", asked, part, steps, [part.split(maxsplit=1)[1]],
        mentions=mentions,
    )  # fmt: skip


# -- assistant -----------------------------------------------------------------------------------


@frame("assistant", "personal")
def book_for_dad(rng: random.Random, p: Persona) -> Fact:
    book, author = pick(
        rng,
        [
            ("The Overstory", "Richard Powers"),
            ("A Gentleman in Moscow", "Amor Towles"),
            ("The Remains of the Day", "Kazuo Ishiguro"),
            ("Project Hail Mary", "Andy Weir"),
        ],
    )
    user = "My dad loved Stoner by John Williams. Any idea for his birthday present?"
    reply = f"Try {book} by {author} — quiet, character-driven and beautifully written."
    asked = ask(
        rng,
        ["Which quiet, character-driven book did you suggest?",
         "What book did you say I should try for my dad?"],
        ["Which novel did you suggest as a gift for my father?",
         "What title did you tell me to buy for my old man?"],
    )  # fmt: skip
    steps = [Step(user, reply, "assistant")]
    return Fact("book", "assistant", "personal", asked, book, steps, [book])


@frame("assistant", "personal")
def recipe(rng: random.Random, p: Persona) -> Fact:
    dish = pick(
        rng, ["a chickpea and spinach curry", "a lentil shepherd's pie", "a roasted squash risotto"]
    )
    user = "I have a bag of pulses and some greens — what can I cook tonight in under an hour?"
    reply = f"Make {dish}: onion, garlic and spices first, then simmer everything for 25 minutes."
    asked = ask(
        rng,
        ["What did you tell me to make and simmer for 25 minutes?",
         "Which dish with onion, garlic and spices did you suggest?"],
        ["What dinner did you propose when I had legumes and leafy veg?",
         "Which meal idea did you give me for the beans and vegetables?"],
    )  # fmt: skip
    return Fact("recipe", "assistant", "personal", asked, dish, [Step(user, reply, "assistant")])


@frame("assistant", "coding")
def cli_name(rng: random.Random, p: Persona) -> Fact:
    name = pick(rng, ["shipwright", "tallyho", "brisket", "gullwing"])
    user = "I need a catchy name for our internal deploy command-line tool. Ideas?"
    reply = f"How about '{name}'? Short, easy to type, and nothing popular on PyPI uses it."
    asked = ask(
        rng,
        ["Which short, easy to type name did you suggest?",
         "What name did you find that nothing on PyPI uses?"],
        ["What did you propose calling my release CLI?",
         "Which name did you come up with for the deployment utility?"],
    )  # fmt: skip
    steps = [Step(user, reply, "assistant")]
    return Fact("cli_name", "assistant", "coding", asked, name, steps, [name])


@frame("assistant", "coding")
def retry_library(rng: random.Random, p: Persona) -> Fact:
    lib = pick(rng, ["tenacity", "backoff", "stamina"])
    user = "Calls to the partner API fail randomly. Should I hand-roll the retries?"
    reply = (
        f"I wouldn't — use {lib}: decorate the call, set exponential waits and a max of five "
        "attempts."
    )
    asked = ask(
        rng,
        ["What did you say to use for exponential waits?",
         "Which library did you say to decorate the call with?"],
        ["Which package did you point me to for re-trying flaky requests?",
         "What library did you advise for automatic retrying?"],
    )  # fmt: skip
    steps = [Step(user, reply, "assistant")]
    return Fact("retry_lib", "assistant", "coding", asked, lib, steps, [lib])


@frame("assistant", "personal", "trip")
def itinerary_day2(rng: random.Random, p: Persona) -> Fact:
    town = pick(rng, ["Sintra", "Cascais", "Óbidos"])
    user = "Can you sketch a three-day plan for Lisbon? We hate rushing."
    reply = (
        f"Day one the old town; on day two take the train out to {town} and stay for sunset; "
        "day three the riverside museums."
    )
    asked = ask(
        rng,
        ["Where did you say to go on day two?", "Where should we take the train to on day two?"],
        ["Where did you say we should go on the second day of the city break?",
         "Which excursion did you recommend in the itinerary?"],
    )  # fmt: skip
    steps = [Step(user, reply, "assistant")]
    return Fact("day2", "assistant", "personal", asked, town, steps, [town])


# -- abstention ----------------------------------------------------------------------------------

ABSTAIN = [
    ("personal", "What is my brother's job?"),
    ("personal", "When is my mother's birthday?"),
    ("personal", "Which airline did I fly with last Christmas?"),
    ("personal", "What's the name of my childhood best friend?"),
    ("personal", "Which gym chain am I a member of?"),
    ("personal", "What colour did we paint the nursery?"),
    ("personal", "How much did our new fridge cost?"),
    ("personal", "What is my father's favourite football team?"),
    ("coding", "Which cloud region is our data warehouse in?"),
    ("coding", "What's the name of our Kubernetes production cluster?"),
    ("coding", "Which monitoring vendor did we sign a contract with?"),
    ("coding", "How many engineers are on the mobile team?"),
    ("coding", "What port does the billing service listen on?"),
    ("coding", "Which ORM does the analytics service use?"),
    ("coding", "Who wrote the original authentication middleware?"),
    ("coding", "What is the SLA we promised to enterprise customers?"),
]

# -- filler --------------------------------------------------------------------------------------

PERSONAL_FILLER = [
    ("Can you help me write a polite note declining a wedding invitation from a colleague?",
     "Of course. \"Thank you so much for thinking of me — I'm sorry I can't make it on the day, "
     "but I hope it's a wonderful celebration.\" Short, warm, and no excuses needed."),
    ("What's a gentle stretch for lower back stiffness after sitting all day?",
     "Try a knees-to-chest hold for 30 seconds, then a cat-cow sequence, then a slow hip flexor "
     "lunge each side. Stop if anything is sharp rather than stiff."),
    ("Convert 350 Fahrenheit to Celsius for me?", "350°F is about 175°C — gas mark 4."),
    ("Give me three ideas for a rainy Sunday with {kid}.",
     "1) Build a blanket fort and read in it. 2) Bake soft pretzels together. 3) A treasure hunt "
     "with clues hidden around the house."),
    ("How do I get red wine out of a light carpet?",
     "Blot (don't rub), then dab with cold water and a little washing-up liquid; for old stains a "
     "paste of bicarbonate and water left to dry, then vacuumed."),
    ("Summarise the pros and cons of heat pumps for an old terraced house.",
     "Pros: lower running costs and emissions once insulated. Cons: upfront price, radiators may "
     "need upsizing, and draughty houses lose much of the benefit."),
    ("Write a short birthday message for {sister}, something funny but kind.",
     "\"Happy birthday to the only person who can still beat me at Monopoly and gloat about it "
     "for a year. Love you loads!\""),
    ("{partner_name} and I keep arguing about the thermostat. Any compromise ideas?",
     "A smart thermostat with a schedule takes the daily decision away; layering and a warmer "
     "setting in just the evening hours also help."),
    ("Suggest a weekday packed lunch that isn't a sandwich.",
     "A grain bowl: leftover rice, roasted vegetables, a boiled egg or beans, and a jar of "
     "dressing kept separate until lunch."),
    ("How long should I boil an egg for a jammy yolk?", "Six and a half minutes from boiling, "
     "then straight into iced water."),
    ("What's a good way to start journaling without it feeling like homework?",
     "Three lines a night: one thing that happened, one thing you felt, one thing you're "
     "looking forward to. Keep the notebook by the bed."),
    ("{pet_name} keeps chewing the sofa cushions. Tips?",
     "Give an approved chew toy every time it happens, make the cushions unappealing with a "
     "bitter spray, and add more exercise — boredom is the usual cause."),
    ("Draft a message to the landlord about the leaking kitchen tap.",
     "\"Hi, the kitchen tap has been dripping constantly since last week and it's getting worse. "
     "Could you arrange for someone to look at it? I'm flexible on times. Thanks!\""),
    ("What's a good houseplant for a dark bathroom?", "A snake plant, a ZZ plant or a Boston "
     "fern — they all cope with low light and like the humidity."),
    ("Explain compound interest like I'm twelve.",
     "You earn interest on your savings, and next year you earn interest on that interest too — "
     "the pile grows faster the longer you leave it."),
    ("I want to run a 10k in the autumn. How should I build up?",
     "Three runs a week: one easy, one with short faster intervals, one long and slow that grows "
     "by about ten percent a week. Rest days count as training."),
    ("Recommend a board game for four adults who don't like long rules explanations.",
     "Codenames or Just One — you can teach either in two minutes and they work with any mix."),
    ("Help me plan a budget for the weekly food shop.",
     "List dinners first, shop from the list, buy staples in bulk, and track one month of "
     "receipts to see where the money really goes."),
    ("What can I do with overripe bananas besides banana bread?",
     "Freeze them for smoothies, make two-ingredient pancakes with eggs, or blend them into "
     "'nice cream'."),
    ("{friend} asked me to be a referee for a flat application. What do I write?",
     "Say how long you've known them, that they're reliable and tidy, and that you'd happily "
     "answer questions. Keep it to a short paragraph."),
    ("Is it worth getting travel insurance for a short city break?",
     "Usually yes if you don't have an annual policy — cancellations and lost luggage cost more "
     "than the premium, and an EHIC/GHIC doesn't cover everything."),
    ("How do I clean a cast iron pan that's gone rusty?",
     "Scrub the rust off with steel wool, wash, dry thoroughly on the hob, then wipe a thin layer "
     "of oil on and bake it upside down for an hour."),
    ("Give me a quick icebreaker for a team meeting with new people.",
     "\"Two truths and a lie\" about your last holiday — fast, low-stakes and people remember "
     "each other afterwards."),
    ("Write a thank-you note to {friend} for helping us move house.",
     "\"We couldn't have done it without you — thank you for the muscle, the van skills and the "
     "good humour. Dinner's on us once we find the plates!\""),
    ("What's a fair way to split household chores with {partner_name}?",
     "List every chore with how long it takes, split by time rather than count, and swap the "
     "ones you both hate every month."),
    ("I keep waking up at 4am. Anything that helps?",
     "Keep the wake-up time fixed, cut caffeine after lunch, and if you're awake for more than "
     "twenty minutes get up and read somewhere dim until you're sleepy."),
    ("Suggest a name for our street's WhatsApp group.", "\"Number Crunchers\" if you're a "
     "street of numbers, or \"Neighbourly Noise\" — or simply the street name plus a wave emoji."),
    ("How much water should {pet_name} be drinking a day?",
     "Roughly 50-60 ml per kilo of body weight, a bit more in hot weather. A sudden change either "
     "way is worth a call to the vet."),
    ("Any tips for keeping basil alive on a windowsill?",
     "Water when the top of the soil is dry, pinch off the flower buds, and harvest from the top "
     "so it bushes out instead of growing tall."),
    ("Write a two-line caption for a photo of {kid} at the beach.",
     "\"Salt in the hair, sand in every pocket. Best day of the summer so far.\""),
    ("How do I ask for a pay rise without sounding demanding?",
     "Book a dedicated meeting, bring two or three concrete results with numbers, name a figure "
     "based on market data, then stop talking and let them respond."),
    ("Suggest a slow-cooker recipe that's good for batch cooking.",
     "A bean chilli: onions, peppers, three tins of beans, tomatoes, cumin and smoked paprika, "
     "eight hours on low. It freezes well in portions."),
    ("What should go in a basic first-aid kit for the car?",
     "Plasters, sterile dressings, a crepe bandage, antiseptic wipes, gloves, tweezers, a foil "
     "blanket, painkillers and a torch."),
    ("Help me word a message to {sister} about sharing the cost of Mum's present.",
     "\"Shall we go halves on something nice for Mum this year? I was thinking of a weekend "
     "voucher — happy to sort the booking if you send your half whenever.\""),
    ("How often should I descale the kettle?", "Every four to six weeks in a hard-water area: "
     "half water, half white vinegar, boil, leave for an hour, rinse twice."),
    ("Give me a 20-minute bodyweight workout I can do in the living room.",
     "Four rounds: 12 squats, 10 push-ups, 12 lunges a side, 30-second plank, 20 jumping jacks, "
     "one minute rest between rounds."),
    ("What's a nice way to say no to extra work from a neighbour's committee?",
     "\"Thanks for thinking of me — I can't take on anything else this term, but I'll happily "
     "help at the summer fair.\""),
    ("Ideas for a cheap but thoughtful anniversary with {partner_name}?",
     "Recreate your first date at home, write a list of small memories from each year, or plan "
     "a picnic at the place you got engaged."),
    ("Why does my bread come out dense?", "Usually under-proofing or too little kneading; let "
     "the dough double in size and check it springs back slowly when poked."),
    ("How do I stop the bathroom mirror from fogging?", "Run the extractor fan before you "
     "shower, and wipe the glass with a drop of washing-up liquid, buffed off with a dry cloth."),
    ("Can you explain how tax codes on a payslip work?",
     "The code tells your employer how much tax-free pay you get; the number times ten is "
     "roughly the allowance, and letters flag special cases."),
    ("What's a good podcast for a long drive?", "Something narrative works best: a true-crime "
     "series, a history podcast like The Rest Is History, or a radio drama."),
]  # fmt: skip

CODING_FILLER = [
    ("How do I reverse a list in Python without modifying the original?",
     "Use slicing: `reversed_items = items[::-1]`, or `list(reversed(items))` if you prefer "
     "readability."),
    ("What's the difference between a process and a thread?",
     "Processes have separate memory; threads share their process's memory. Threads are cheaper "
     "to start but need locks around shared state."),
    ("Write a regex that matches a UK postcode.",
     "`^[A-Z]{1,2}\\d[A-Z\\d]? ?\\d[A-Z]{2}$` — case-insensitive; it won't validate that the "
     "postcode exists, only its shape."),
    ("Git says I'm in 'detached HEAD' state. Did I break something?",
     "No — you checked out a commit, not a branch. Run `git switch -c my-branch` to keep any "
     "work you do there."),
    ("When would I use useMemo versus useCallback in React?",
     "useMemo caches a computed value; useCallback caches a function identity. Reach for either "
     "only when a child re-renders because of a new reference."),
    ("Can you make this query faster? SELECT * FROM orders WHERE customer_id = $1 "
     "ORDER BY created_at DESC LIMIT 20",
     "Add a composite index on (customer_id, created_at DESC) and select only the columns you "
     "need; the planner can then skip the sort entirely."),
    ("Explain what a Python context manager does under the hood.",
     "`with` calls `__enter__` before the block and `__exit__` after it — even on exceptions — "
     "which is why it's the idiom for files, locks and transactions."),
    ("Review this function name: process_data2_final. Better ideas?",
     "Name it after what it does: `merge_daily_exports` or `normalise_invoice_rows`, whichever "
     "describes the actual transformation."),
    ("How do I squash my last three commits?",
     "`git rebase -i HEAD~3`, mark the last two as `squash`, save, then edit the combined "
     "message. Force-push only if the branch is yours alone."),
    ("What's a sensible timeout for an HTTP client calling an internal service?",
     "Start with a connect timeout of about 2 s and a read timeout just above the service's p99 "
     "latency; add retries with jitter only for idempotent calls."),
    ("Write a Dockerfile for a small FastAPI app.",
     "Use python:3.12-slim, copy requirements first and pip install them, copy the app, run as a "
     "non-root user and start uvicorn on 0.0.0.0:8000."),
    ("Why does my pandas merge produce more rows than either input?",
     "Duplicate keys on both sides multiply: each left row matches every right row with the "
     "same key. Check with `df.key.duplicated().sum()` on each side."),
    ("How do I structure a pull request description?",
     "What changed, why, how it was tested, and anything reviewers should look at first. A "
     "screenshot for UI changes."),
    ("Explain database connection pooling briefly.",
     "A pool keeps open connections and lends them out, so requests skip the expensive "
     "handshake; size it to what the database can actually serve."),
    ("What's the cleanest way to read environment variables with defaults in Go?",
     "Write a tiny helper: `func getenv(k, def string) string { if v, ok := os.LookupEnv(k); ok "
     "{ return v }; return def }`."),
    ("I keep mixing up == and is in Python.",
     "`==` compares values; `is` compares identity. Use `is` only for None, True/False and "
     "sentinels."),
    ("Can you write a bash one-liner to find the 10 biggest files in a directory?",
     "`du -ah . | sort -rh | head -n 10`"),
    ("How should I name feature branches in {project}?",
     "Something like `feat/<ticket>-short-slug` or `fix/<ticket>-short-slug`, so the ticket "
     "links up automatically and the purpose is obvious."),
    ("{colleague} asked for a code review checklist. Got one?",
     "Correctness first, then tests, naming, error handling, performance hot spots, and finally "
     "style — and leave at least one positive comment."),
    ("What's the difference between a merge and a rebase?",
     "A merge keeps both histories and adds a merge commit; a rebase replays your commits on top "
     "of the target, giving a linear history but new commit ids."),
    ("How do I profile a slow Python script?",
     "`python -m cProfile -o out.prof script.py`, then open it with snakeviz; py-spy works on a "
     "running process without changes."),
    ("Explain idempotency keys for payment APIs.",
     "The client sends a unique key with a request; the server stores the first result under it "
     "and returns that same result for retries instead of charging twice."),
    ("Write a SQL query for the top five customers by revenue last month.",
     "`SELECT customer_id, SUM(total) AS revenue FROM orders WHERE created_at >= "
     "date_trunc('month', now()) - interval '1 month' AND created_at < "
     "date_trunc('month', now()) GROUP BY 1 ORDER BY 2 DESC LIMIT 5;`"),
    ("Is it bad to catch Exception in Python?",
     "At the top of a worker loop or request handler it's fine if you log it; deep inside "
     "business logic it hides bugs — catch the specific errors you expect."),
    ("What are good log levels conventions?",
     "DEBUG for developer detail, INFO for business events, WARNING for recoverable oddities, "
     "ERROR when a request failed, CRITICAL when the service can't continue."),
    ("How do I write a GitHub Actions job that caches pip downloads?",
     "Use actions/setup-python with `cache: pip`; it keys the cache on your requirements files "
     "automatically."),
    ("The {project} README is a mess. How would you structure it?",
     "One-line pitch, quick start, configuration, development setup, architecture overview, "
     "troubleshooting, and links to deeper docs."),
    ("Explain the CAP theorem in two sentences.",
     "During a network partition a distributed store must choose between consistency and "
     "availability. When there's no partition you can have both, and trade latency instead."),
    ("What's a quick way to pretty-print JSON in the terminal?",
     "`jq . file.json`, or `python -m json.tool file.json` if jq isn't installed."),
    ("Should I use UUIDs or integers for primary keys?",
     "Integers are smaller and index better; UUIDs (ideally v7) avoid guessable ids and merge "
     "easily across systems. Pick per table."),
    ("How do I undo the last commit but keep the changes?", "`git reset --soft HEAD~1` — the "
     "changes stay staged; use `--mixed` to unstage them too."),
    ("What's the difference between TCP and UDP in one paragraph?",
     "TCP gives an ordered, reliable byte stream with retransmission and congestion control; UDP "
     "sends independent datagrams with no guarantees, which suits streaming and DNS."),
    ("Write a Python function that chunks a list into pieces of n.",
     "`def chunks(xs, n): return [xs[i:i + n] for i in range(0, len(xs), n)]` — or "
     "itertools.batched on 3.12."),
    ("How should I store passwords in a database?", "Never encrypted, always hashed with a slow "
     "algorithm like Argon2id or bcrypt, each with its own salt."),
    ("Explain what a race condition is with a small example.",
     "Two threads read a counter as 5, both add one and both write 6: one increment is lost "
     "because read-modify-write wasn't atomic."),
    ("When should I add an index to a table?", "When a frequent query filters or sorts on a "
     "column and the table is big enough for scans to hurt; each index slows writes a little."),
    ("Our {project} tests are slow. Where do I start?", "Measure first with `--durations=20`, "
     "then look for real network or database calls, sleeps, and fixtures that rebuild "
     "expensive state per test."),
    ("How do I write a good commit message body?", "Explain why the change was needed and what "
     "it affects, wrapped at 72 characters; the diff already shows what changed."),
    ("Convert this curl to Python requests: curl -H 'Accept: application/json' https://example.com/api",
     "`requests.get('https://example.com/api', headers={'Accept': 'application/json'})`"),
    ("What is a dead-letter queue for?", "It collects messages that failed processing too many "
     "times, so they stop blocking the queue and someone can inspect or replay them."),
    ("Should I use a monorepo?", "It pays off when projects share code and release together; "
     "with independent teams and release cycles, separate repos are simpler."),
    ("How do I make a bash script stop at the first error?", "Start it with `set -euo "
     "pipefail` — exit on errors, on unset variables and on failures inside pipes."),
    ("{colleague} says our API should return 422 instead of 400. Who's right?",
     "422 is more precise for a well-formed request that fails validation; 400 for malformed "
     "syntax. Either is fine if you're consistent and document it."),
    ("What's a good structure for a runbook?", "Symptoms, impact, the dashboards to check, "
     "step-by-step mitigation, escalation contacts, and a link to the follow-up ticket."),
]  # fmt: skip

OPENERS = {
    "personal": [
        "Morning! A few household things today.",
        "Hi again — got a couple of things on my mind.",
        "Evening. Can we go through some personal admin?",
        "Hey, quick session before the school run.",
    ],
    "coding": [
        "Hi — back on the {project} codebase today.",
        "Morning, a few work questions for you.",
        "Hey, debugging day again.",
        "Hello! Some engineering stuff to go through.",
    ],
}
OPENER_REPLY = [
    "Hi! Go ahead, I'm ready.",
    "Hello again — what's first?",
    "Sure, what do you need?",
    "Happy to help. What's up?",
]
#: How a user sometimes brings up a fact in the middle of a session.
LEAD_INS = ["", "", "", "Quick context: ", "By the way — ", "Unrelated, but: ", "FYI: ",
            "Something to remember: "]  # fmt: skip
CLOSERS = [
    ("Thanks, that's all for now.", "You're welcome — talk soon!"),
    ("Great, cheers.", "Any time."),
    ("Perfect, that helps a lot.", "Glad to hear it. Good luck!"),
]


# -- assembly ------------------------------------------------------------------------------------


def make_persona(rng: random.Random, index: int) -> Persona:
    people = rng.sample(FRIENDS, 10)
    return Persona(
        user=USERS[index % len(USERS)],
        partner=pick(rng, PARTNERS),
        sister=pick(rng, SISTERS),
        sister_city=pick(rng, CITIES),
        friends=people[:3],
        kid=pick(rng, KIDS),
        pet=pick(rng, PETS),
        city=pick(rng, CITIES),
        project=pick(rng, PROJECTS),
        colleagues=rng.sample(COLLEAGUES, 7),
        rare=rng.sample(RARE_PEOPLE, 2),
        start=date(2024, 1, 8) + timedelta(days=rng.randint(0, 200)),
    )


def choose_facts(rng: random.Random, p: Persona, profile: str) -> list[Fact]:
    """The conversation's facts: :data:`PLAN` per category, drawn by the profile's domain
    weights, at most one frame per group."""
    want = {"personal": 0.8, "coding": 0.2, "mixed": 0.5}[profile]
    used: set[str] = set()
    facts: list[Fact] = []
    for category, n in PLAN.items():
        pool = list(FRAMES[category])
        rng.shuffle(pool)
        pool.sort(
            key=lambda f: rng.random() * (want if f[0] == "personal" else 1 - want), reverse=True
        )
        for _domain, group, fn in pool:
            if len([f for f in facts if f.category == category]) >= n:
                break
            if group in used:
                continue
            fact = fn(rng, p)
            if any(_clash(fact, other) or _clash(other, fact) for other in facts):
                continue  # its turns would hold another question's answer term (or vice versa)
            used.add(group)
            facts.append(fact)
    return facts


def _clash(a: Fact, b: Fact) -> bool:
    """Whether a turn of ``a`` mentions a key term of ``b``'s answer."""
    texts = [t for s in [*a.steps, *a.mentions] for t in (s.user, s.assistant)]
    return any(_mentions(text, term) for text in texts for term in b.terms)


def fill(text: str, p: Persona) -> str:
    """A template with the persona's names (``{sister}``...); other braces are left alone."""
    names = {
        "kid": p.kid[1],
        "sister": p.sister,
        "partner_name": p.partner[1],
        "pet_name": p.pet[2],
        "friend": p.friends[0],
        "project": p.project,
        "colleague": p.colleagues[0],
    }
    return re.sub(r"\{(\w+)\}", lambda m: names.get(m.group(1), m.group(0)), text)


def _mentions(text: str, term: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(term.lower()) + r"(?!\w)", text.lower()) is not None


def build_conversation(rng: random.Random, index: int) -> dict[str, Any]:
    """One conversation: persona, dated sessions of turns, and its labelled questions."""
    profile = PROFILES[index % len(PROFILES)]
    p = make_persona(rng, index)
    facts = choose_facts(rng, p, profile)
    n_sessions = rng.randint(8, 10)
    want_personal = {"personal": 0.8, "coding": 0.2, "mixed": 0.5}[profile]
    dates = [p.start]
    for _ in range(n_sessions - 1):
        dates.append(dates[-1] + timedelta(days=rng.randint(2, 9)))
    domains = ["personal" if rng.random() < want_personal else "coding" for _ in dates]
    # Where each fact's steps go: ordered steps in increasing sessions, the others anywhere
    # (two-step facts in two different sessions, as in real multi-session memory); a dated
    # event is mentioned before it happens, and a fact preferably in a session of its domain.
    slots: dict[int, list[tuple[int, int]]] = {s: [] for s in range(n_sessions)}
    for fi, fact in enumerate(facts):
        ok = [s for s in range(n_sessions) if fact.before is None or dates[s] <= fact.before]
        if len(ok) < len(fact.steps):
            ok = list(range(len(fact.steps)))
        if len(fact.steps) == 1:
            same = [s for s in ok if domains[s] == fact.domain]
            slots[pick(rng, same if same and rng.random() < 0.8 else ok)].append((fi, 0))
        else:
            chosen = sorted(rng.sample(ok, len(fact.steps)))
            if not fact.ordered:
                rng.shuffle(chosen)
            for si, s in enumerate(chosen):
                slots[s].append((fi, si))
        for mi in range(len(fact.mentions)):
            slots[rng.randrange(n_sessions)].append((fi, -1 - mi))
    terms = [t for f in facts for t in f.terms]
    personal_filler = [(fill(u, p), fill(a, p)) for u, a in PERSONAL_FILLER]
    coding_filler = [(fill(u, p), fill(a, p)) for u, a in CODING_FILLER]
    filler_pool = {
        "personal": [
            x for x in personal_filler if not any(_mentions(x[0] + x[1], t) for t in terms)
        ],
        "coding": [x for x in coding_filler if not any(_mentions(x[0] + x[1], t) for t in terms)],
    }
    for pool in filler_pool.values():
        rng.shuffle(pool)
    cid = f"c{index + 1:02d}"
    sessions = []
    evidence: dict[int, list[str]] = {fi: [] for fi in range(len(facts))}
    for s in range(n_sessions):
        sid = f"{cid}-s{s + 1:02d}"
        turns: list[dict[str, str]] = []

        def add(
            speaker: str, text: str, sid: str = sid, turns: list[dict[str, str]] = turns
        ) -> str:
            tid = f"{sid}-t{len(turns) + 1:02d}"
            turns.append({"id": tid, "speaker": speaker, "text": text})
            return tid

        domain = domains[s]
        add("user", fill(pick(rng, OPENERS[domain]), p))
        add("assistant", pick(rng, OPENER_REPLY))
        exchanges: list[tuple[str, Any]] = [("fact", x) for x in slots[s]]
        n_filler = rng.randint(5, 8)
        for _ in range(n_filler):
            other = "coding" if domain == "personal" else "personal"
            dom = domain if rng.random() < 0.75 else other
            pool = filler_pool[dom] or filler_pool["coding" if dom == "personal" else "personal"]
            if pool:
                exchanges.append(("filler", pool.pop()))
        rng.shuffle(exchanges)
        for kind, item in exchanges:
            if kind == "filler":
                add("user", item[0])
                add("assistant", item[1])
                continue
            fi, si = item
            if si < 0:  # a mention: the identifier again, not the answer
                mention = facts[fi].mentions[-1 - si]
                add("user", mention.user)
                add("assistant", mention.assistant)
                continue
            step = facts[fi].steps[si]
            lead = (
                pick(rng, LEAD_INS) if step.evidence == "user" and ":" not in step.user[:28] else ""
            )
            ut = add("user", lead + step.user)
            at = add("assistant", step.assistant)
            evidence[fi].append(ut if step.evidence == "user" else at)
        closer = pick(rng, CLOSERS)
        add("user", closer[0])
        add("assistant", closer[1])
        sessions.append({"id": sid, "date": dates[s].isoformat(), "turns": turns})
    questions = []
    for fi, fact in enumerate(facts):
        questions.append(
            {
                "question": fact.asked[0],
                "wording": fact.asked[1],
                "category": fact.category,
                "domain": fact.domain,
                "answer": fact.answer,
                "evidence": evidence[fi],
                "terms": fact.terms,
            }
        )
    abstain = [q for d, q in ABSTAIN if d == profile or profile == "mixed" or rng.random() < 0.3]
    for q in rng.sample(abstain, 1 + (index % 2)):
        questions.append(
            {
                "question": q,
                "wording": "abstention",
                "category": "abstention",
                "domain": "",
                "answer": None,
                "evidence": [],
                "terms": [],
            }
        )
    rng.shuffle(questions)
    for n, q in enumerate(questions):
        q["id"] = f"{cid}-q{n + 1:02d}"
    return {
        "id": cid,
        "profile": profile,
        "user": p.user,
        "split": "tune" if index % 2 == 0 else "test",
        "sessions": sessions,
        "questions": [
            {
                k: q[k]
                for k in (
                    "id",
                    "question",
                    "wording",
                    "category",
                    "domain",
                    "answer",
                    "evidence",
                    "terms",
                )
            }
            for q in questions
        ],
    }


def build(seed: int = SEED, n: int = N_CONVERSATIONS) -> dict[str, Any]:
    """The whole data set (pure function of the seed)."""
    rng = random.Random(seed)
    conversations = [build_conversation(rng, i) for i in range(n)]
    return {
        "version": 1,
        "description": (
            "Synthetic multi-session user/assistant conversations with labelled evidence turns "
            "(written by bench/make_conversations.py, seeded; see its docstring). Never used "
            "for tuning. Each question lists the ids of the turns that answer it; abstention "
            "questions have none. 'split' assigns each conversation to the tune or test half."
        ),
        "generator": "bench/make_conversations.py",
        "seed": seed,
        "conversations": conversations,
    }


def validate(data: dict[str, Any]) -> None:
    """Raise ``ValueError`` if a label is wrong: an evidence id that is no turn of its
    conversation, an answer's key term in a turn that is not evidence, an answerable question
    without evidence."""
    for conv in data["conversations"]:
        turns = {t["id"]: t["text"] for s in conv["sessions"] for t in s["turns"]}
        for q in conv["questions"]:
            if bool(q["evidence"]) == (q["category"] == "abstention"):
                raise ValueError(f"{q['id']}: evidence does not match its category")
            missing = [e for e in q["evidence"] if e not in turns]
            if missing:
                raise ValueError(f"{q['id']}: no such turns {missing}")
            for term in q["terms"]:
                leaks = [i for i, text in turns.items() if _mentions(text, term)]
                if set(leaks) - set(q["evidence"]):
                    raise ValueError(f"{q['id']}: {term!r} also in {leaks}")


def dumps(data: dict[str, Any]) -> str:
    """Compact but diffable: one line per turn and per question."""
    out = ["{"]
    head = {k: v for k, v in data.items() if k != "conversations"}
    for k, v in head.items():
        out.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    out.append('  "conversations": [')
    convs = data["conversations"]
    for ci, c in enumerate(convs):
        out.append("    {")
        meta = {k: v for k, v in c.items() if k not in ("sessions", "questions")}
        for k, v in meta.items():
            out.append(f"      {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
        out.append('      "sessions": [')
        for si, s in enumerate(c["sessions"]):
            head = f'{{"id": {json.dumps(s["id"])}, "date": {json.dumps(s["date"])}, "turns": ['
            out.append("        " + head)
            for ti, t in enumerate(s["turns"]):
                sep = "," if ti < len(s["turns"]) - 1 else ""
                out.append("          " + json.dumps(t, ensure_ascii=False) + sep)
            out.append("        ]}" + ("," if si < len(c["sessions"]) - 1 else ""))
        out.append("      ],")
        out.append('      "questions": [')
        for qi, q in enumerate(c["questions"]):
            sep = "," if qi < len(c["questions"]) - 1 else ""
            out.append("        " + json.dumps(q, ensure_ascii=False) + sep)
        out.append("      ]")
        out.append("    }" + ("," if ci < len(convs) - 1 else ""))
    out.append("  ]")
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    built = build()
    validate(built)
    text = dumps(built)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is not what {__name__} generates; rerun it", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    data = json.loads(text)
    n_q = sum(len(c["questions"]) for c in data["conversations"])
    n_t = sum(len(s["turns"]) for c in data["conversations"] for s in c["sessions"])
    print(
        f"{args.out}: {len(data['conversations'])} conversations, {n_t} turns, {n_q} questions, "
        f"{len(text.encode()) / 1e6:.2f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
