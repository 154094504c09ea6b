"""Generators of the chat families that need no tool: a translation, a general-knowledge
question, what a shell command does.

Their prompts avoid every word the tools are described by (file, line, name, how many, show...),
so the tool selection offers the model the answer tool alone, as it will for such messages.
"""

from __future__ import annotations

import random

from cli.evals.generators.base import Generated, Generator, pick
from cli.evals.suite import Check

LANGUAGES = ("French", "Spanish", "German")
# An English word or phrase and, per language, the translation and a regex that accepts it
# (with or without its accents).
TRANSLATIONS: dict[str, tuple[tuple[str, str], tuple[str, str], tuple[str, str]]] = {
    "apple": (("pomme", "pomme"), ("manzana", "manzana"), ("Apfel", "apfel")),
    "house": (("maison", "maison"), ("casa", "casa"), ("Haus", "haus")),
    "dog": (("chien", "chien"), ("perro", "perro"), ("Hund", "hund")),
    "book": (("livre", "livre"), ("libro", "libro"), ("Buch", "buch")),
    "water": (("eau", "eau"), ("agua", "agua"), ("Wasser", "wasser")),
    "bread": (("pain", "pain"), ("pan", "pan"), ("Brot", "brot")),
    "friend": (("ami", "amie?"), ("amigo", "amig[oa]"), ("Freund", "freund")),
    "moon": (("lune", "lune"), ("luna", "luna"), ("Mond", "mond")),
    "sun": (("soleil", "soleil"), ("sol", "sol"), ("Sonne", "sonne")),
    "tree": (("arbre", "arbre"), ("árbol", "[aá]rbol"), ("Baum", "baum")),
    "milk": (("lait", "lait"), ("leche", "leche"), ("Milch", "milch")),
    "red": (("rouge", "rouge"), ("rojo", "roj[oa]"), ("rot", "rot")),
    "black": (("noir", "noire?"), ("negro", "negr[oa]"), ("schwarz", "schwarz")),
    "thank you": (("merci", "merci"), ("gracias", "gracias"), ("danke", "danke")),
    "good night": (
        ("bonne nuit", "bonne nuit"),
        ("buenas noches", "buenas noches"),
        ("gute Nacht", "gute nacht"),
    ),
    "hello": (("bonjour", "bonjour"), ("hola", "hola"), ("hallo", "hallo")),
    "goodbye": (
        ("au revoir", "au revoir"),
        ("adiós", "adi[oó]s"),
        ("auf Wiedersehen", "auf wiedersehen"),
    ),
    "school": (("école", "[eé]cole"), ("escuela", "escuela"), ("Schule", "schule")),
    "flower": (("fleur", "fleur"), ("flor", "flor"), ("Blume", "blume")),
    "cheese": (("fromage", "fromage"), ("queso", "queso"), ("Käse", "k(?:ä|ae?)se")),
}

# A question with one right answer, the reply, and a regex the reply must match.
QUESTIONS = (
    ("What is the capital of France?", "The capital of France is Paris.", r"\bParis\b"),
    ("What is the capital of Japan?", "The capital of Japan is Tokyo.", r"\bTokyo\b"),
    ("What is the capital of Italy?", "The capital of Italy is Rome.", r"\bRome\b"),
    ("What is the capital of Canada?", "The capital of Canada is Ottawa.", r"\bOttawa\b"),
    ("What is the capital of Australia?", "The capital of Australia is Canberra.", r"\bCanberra\b"),
    ("Who wrote Romeo and Juliet?", "William Shakespeare wrote it.", r"\bShakespeare\b"),
    ("Which planet is closest to the sun?", "Mercury is closest to the sun.", r"\bMercury\b"),
    (
        "What is the largest planet in our solar system?",
        "Jupiter is the largest planet.",
        r"\bJupiter\b",
    ),
    ("What is the chemical symbol for gold?", "The chemical symbol for gold is Au.", r"\bAu\b"),
    (
        "At what temperature in Celsius does water boil at sea level?",
        "Water boils at 100 degrees Celsius.",
        r"\b100\b",
    ),
    (
        "Who painted the Mona Lisa?",
        "Leonardo da Vinci painted the Mona Lisa.",
        r"\b(?:Leonardo|Vinci)\b",
    ),
    ("What is the largest ocean on Earth?", "The Pacific Ocean is the largest.", r"\bPacific\b"),
    (
        "What is the tallest mountain in the world?",
        "Mount Everest is the tallest mountain.",
        r"\bEverest\b",
    ),
    ("On which continent is Kenya?", "Kenya is in Africa.", r"\bAfrica\b"),
    (
        "What language do people speak in Brazil?",
        "People in Brazil speak Portuguese.",
        r"\bPortuguese\b",
    ),
    ("What is the square root of 81?", "The square root of 81 is 9.", r"\b9\b"),
    ("Who was the first person to walk on the moon?", "Neil Armstrong, in 1969.", r"\bArmstrong\b"),
    (
        "Which gas do plants take in from the air?",
        "Plants take in carbon dioxide (CO2).",
        r"\b(?:carbon dioxide|CO2)\b",
    ),
    (
        "What is the freezing point of water in Fahrenheit?",
        "Water freezes at 32 degrees Fahrenheit.",
        r"\b32\b",
    ),
    ("Who developed the theory of relativity?", "Albert Einstein developed it.", r"\bEinstein\b"),
)

# A shell command line, what it does, and a regex for the key idea the reply must hold.
COMMANDS = (
    (
        "pwd",
        "It prints the current working directory, the folder you are in.",
        r"(?i)\b(?:directory|folder)\b",
    ),
    ("whoami", "It prints the name of the current user.", r"(?i)\buser\b"),
    (
        "df -h",
        "It shows how much disk space is used and free, in human-readable sizes.",
        r"(?i)\b(?:disk|space)\b",
    ),
    (
        "du -hs photos",
        "It shows the total disk usage of the photos folder.",
        r"(?i)\b(?:disk|space|size|usage)\b",
    ),
    (
        "uptime",
        "It shows how long the system has been running, and its load.",
        r"(?i)\b(?:running|boot|load)\b",
    ),
    ("ps aux", "It lists every running process with its owner and resource use.", r"(?i)\bprocess"),
    (
        "tar -czf site.tar.gz site",
        "It packs the site folder into a gzip-compressed archive, site.tar.gz.",
        r"(?i)\b(?:archive|compress)",
    ),
    (
        "unzip photos.zip",
        "It extracts the files in the zip archive photos.zip.",
        r"(?i)\b(?:extract|unpack|decompress)",
    ),
    (
        "ping -c 3 example.com",
        "It sends three echo requests to example.com to test whether it is reachable.",
        r"(?i)\b(?:reach|network|packet|request|respond)",
    ),
    ("free -h", "It shows how much memory is used and free.", r"(?i)\bmemory\b"),
    (
        "uname -a",
        "It prints information about the system: the kernel name, version and machine.",
        r"(?i)\b(?:kernel|system)\b",
    ),
    ("date", "It prints the current date and time.", r"(?i)\btime\b"),
    ("clear", "It clears the terminal screen.", r"(?i)\b(?:screen|terminal)\b"),
    ("history", "It prints the commands you typed before.", r"(?i)\bcommands?\b"),
    (
        "diff a.txt b.txt",
        "It compares a.txt and b.txt and prints the lines that differ.",
        r"(?i)\b(?:compar|differ)",
    ),
    (
        "kill 4242",
        "It sends a signal to the process 4242 to stop it.",
        r"(?i)\b(?:stop|terminat|signal)",
    ),
    (
        "wget https://example.com/data.zip",
        "It downloads data.zip from example.com.",
        r"(?i)\bdownload",
    ),
)


def _styled(rng: random.Random, question: str) -> str:
    """The question as people type it: as is, in lower case, with a lead-in or a please."""
    bare = question.rstrip("?")
    return pick(
        rng,
        question,
        question.lower(),
        f"Quick question: {bare[0].lower() + bare[1:]}?",
        f"{bare}, please?",
    )


def translate(rng: random.Random) -> Generated:
    """A word or phrase translated, with no tool."""
    english = rng.choice(list(TRANSLATIONS))
    index = rng.randrange(len(LANGUAGES))
    language = LANGUAGES[index]
    word, regex = TRANSLATIONS[english][index]
    prompt = pick(
        rng,
        f"Translate {english} into {language}.",
        f"What is '{english}' in {language}?",
        f"translate '{english}' to {language.lower()}",
        f"What's the {language} for {english}?",
        f"{english} in {language}, please?",
    )
    return Generated(
        "translate",
        prompt,
        {},
        Check(answer_regex=rf"(?i)\b{regex}\b", max_calls=0),
        [],
        f"In {language}, {english} is {word}.",
    )


def general_question(rng: random.Random) -> Generated:
    """A general-knowledge question with one right answer, with no tool."""
    question, answer, regex = rng.choice(QUESTIONS)
    return Generated(
        "general-question",
        _styled(rng, question),
        {},
        Check(answer_regex=f"(?i){regex}", max_calls=0),
        [],
        answer,
    )


def explain_command(rng: random.Random) -> Generated:
    """What a shell command line does, explained with no tool."""
    line, answer, regex = rng.choice(COMMANDS)
    prompt = pick(
        rng,
        f"What does `{line}` do?",
        f"Explain {line}",
        f"what is `{line}` for?",
        f"Briefly, what does {line} do?",
        f"I saw `{line}` in a guide. What does it do?",
    )
    return Generated(
        "explain-command", prompt, {}, Check(answer_regex=regex, max_calls=0), [], answer
    )


CHAT_FAMILIES: dict[str, Generator] = {
    "translate": translate,
    "general-question": general_question,
    "explain-command": explain_command,
}
